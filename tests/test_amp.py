"""Mixed precision against PyTorch's CPU autocast: which dtype each op computes in, values and gradients; the same
under `aotjax.jit` (traced once per autocast dtype); `GradScaler` step by step against torch's, eagerly and inside a
step compiled whole; and the `torch.cuda` / `torch.backends` shims a script touches on a machine without a GPU."""
import warnings

import numpy as np
import pytest
import torch

import aotjax

_W = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
_X = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
_IMG = np.random.default_rng(2).standard_normal((2, 3, 5, 5)).astype(np.float32)
_K = np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype(np.float32)


def _dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


def _ops(T):
    F = T.nn.functional
    w, x = T.tensor(_W), T.tensor(_X)
    q = T.tensor(_X).reshape(1, 1, 3, 4)
    low = x.to(T.bfloat16)
    return {
        "linear": lambda: F.linear(x, w),
        "matmul": lambda: x @ w.t(),
        "mm": lambda: T.mm(x, w.t()),
        "bmm": lambda: T.bmm(x[None], w.t()[None]),
        "conv2d": lambda: F.conv2d(T.tensor(_IMG), T.tensor(_K)),
        "sdpa": lambda: F.scaled_dot_product_attention(q, q, q),
        "softmax": lambda: F.softmax(low, dim=-1),
        "log_softmax": lambda: F.log_softmax(low, dim=-1),
        "layer_norm": lambda: F.layer_norm(low, (4,)),
        "cross_entropy": lambda: F.cross_entropy(low, T.tensor([0, 2, 1])),
        "mse_loss": lambda: F.mse_loss(low, x),
        "add_mixed": lambda: low + x,
        "relu": lambda: F.relu(low),
        "mha_padded_out": lambda: _padded_attention(T)[0],
        "mha_padded_weights": lambda: _padded_attention(T)[1],
    }


def _padded_attention(T):
    """MultiheadAttention with a key padding mask (its weights come from one autocast `baddbmm` in torch)."""
    mha = T.nn.MultiheadAttention(4, 2, batch_first=True)
    rng = np.random.default_rng(4)
    with T.no_grad():
        for p in mha.parameters():
            p.copy_(T.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))
    x = T.tensor(_X)[None]
    return mha(x, x, x, key_padding_mask=T.tensor([[False, False, True]]))


def test_each_op_computes_in_torchs_dtype_under_autocast():
    ours, theirs = {}, {}
    with aotjax.autocast("cpu", dtype=aotjax.bfloat16):
        for name, op in _ops(aotjax).items():
            ours[name] = op()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for name, op in _ops(torch).items():
            theirs[name] = op()
    assert {k: _dtype_name(v) for k, v in ours.items()} == {k: _dtype_name(v) for k, v in theirs.items()}
    for name in ours:
        a = np.asarray(ours[name].float().numpy(), dtype=np.float32)
        b = theirs[name].float().detach().numpy()
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=3e-2, err_msg=name)


def _model(T):
    T.manual_seed(0)
    model = T.nn.Sequential(T.nn.Linear(4, 8), T.nn.ReLU(), T.nn.Linear(8, 3))
    with T.no_grad():
        for p, v in zip(model.parameters(), _params_values(), strict=True):
            p.copy_(T.tensor(v))
    return model


def _params_values():
    rng = np.random.default_rng(5)
    return [rng.standard_normal(s).astype(np.float32) * 0.5 for s in [(8, 4), (8,), (3, 8), (3,)]]


def test_gradients_under_autocast_are_in_the_parameters_dtype_and_match_torch():
    def run(T):
        model = _model(T)
        with T.autocast("cpu", dtype=T.bfloat16):
            loss = T.nn.functional.cross_entropy(model(T.tensor(_X)), T.tensor([0, 2, 1]))
        loss.backward()
        return loss, [p.grad for p in model.parameters()]

    (loss, grads), (tloss, tgrads) = run(aotjax), run(torch)
    assert _dtype_name(loss) == _dtype_name(tloss) == "float32"
    for g, tg in zip(grads, tgrads, strict=True):
        assert g.dtype == np.float32
        np.testing.assert_allclose(np.asarray(g.numpy()), tg.numpy(), rtol=3e-2, atol=3e-2)


def test_a_jitted_function_traces_once_per_autocast_dtype():
    w = aotjax.tensor(_W)

    @aotjax.jit
    def f(x):
        return x @ w.t()

    x = aotjax.tensor(_X)
    plain = f(x)
    with aotjax.autocast("cpu"):
        low = f(x)
        low_again = f(x)
    after = f(x)
    assert (plain.dtype, low.dtype, low_again.dtype, after.dtype) == (np.float32, np.dtype("bfloat16"),
                                                                      np.dtype("bfloat16"), np.float32)
    assert f.trace_count == 2


def test_nested_regions_decorator_and_unsupported_dtype():
    x = aotjax.tensor(_X)

    @aotjax.autocast("cpu")
    def decorated():
        with aotjax.autocast("cpu", enabled=False):
            inner = x @ x.t()
        return inner, x @ x.t()

    inner, outer = decorated()
    assert (inner.dtype, outer.dtype) == (np.float32, np.dtype("bfloat16"))
    assert not aotjax.amp.is_autocast_enabled()
    with pytest.warns(UserWarning, match="target dtype is not supported. Disabling autocast"):
        region = aotjax.autocast("cpu", dtype=aotjax.float64 if hasattr(aotjax, "float64") else "float64")
    with region:
        assert (x @ x.t()).dtype == np.float32
    assert aotjax.cuda.amp.autocast().fast_dtype == np.float16
    assert aotjax.cpu.amp.autocast().fast_dtype == np.dtype("bfloat16")


# -- GradScaler ---------------------------------------------------------------------------------------------------
_BATCHES = [1.0, 1.0, float("inf"), 1.0, 1.0, 1.0, float("nan"), 1.0]


def _scaled_steps(T, scaler, step_fn=None):
    model = _model(T)
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y, factor):
        opt.zero_grad()
        loss = T.nn.functional.cross_entropy(model(x) * factor, y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        return loss.detach()

    run = step_fn(step) if step_fn is not None else step
    scales, weights = [], []
    for factor in _BATCHES:
        run(T.tensor(_X), T.tensor([0, 2, 1]), T.tensor(factor))
        scales.append(scaler.get_scale())
        weights.append(np.asarray(model[0].weight.detach().numpy()).copy())
    return scales, weights, run


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_grad_scaler_skips_overflowing_steps_and_adapts_the_scale_as_torch(compiled):
    kwargs = {"init_scale": 256.0, "growth_interval": 2}
    ours = _scaled_steps(aotjax, aotjax.amp.GradScaler("cpu", **kwargs), aotjax.jit if compiled else None)
    theirs = _scaled_steps(torch, torch.amp.GradScaler("cpu", **kwargs))
    assert ours[0] == theirs[0]
    for a, b in zip(ours[1], theirs[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    if compiled:
        assert ours[2].trace_count == 1


def test_grad_scaler_state_dict_and_misuse():
    scaler = aotjax.amp.GradScaler("cpu", init_scale=8.0)
    theirs = torch.amp.GradScaler("cpu", init_scale=8.0)
    assert scaler.state_dict() == theirs.state_dict()
    w = aotjax.tensor([1.0], requires_grad=True)
    opt = aotjax.optim.SGD([w], lr=0.1)
    scaler.scale((w * 2).sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    disabled = aotjax.amp.GradScaler("cpu", enabled=False)
    assert disabled.scale(w) is w and disabled.get_scale() == 1.0 and disabled.state_dict() == {}
    with pytest.raises(ValueError, match="growth factor"):
        aotjax.amp.GradScaler("cpu", growth_factor=0.5)


# -- the shims -----------------------------------------------------------------------------------------------------
def test_cuda_and_backends_shims_on_a_machine_without_a_gpu():
    import jax
    if any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("this machine has a GPU: the shims report it (checked in the GPU benchmark run)")
    assert not aotjax.cuda.is_available() and aotjax.cuda.device_count() == 0
    assert not aotjax.cuda.is_bf16_supported() and aotjax.cuda.memory_allocated() == 0
    device = "cuda" if aotjax.cuda.is_available() else "cpu"
    assert aotjax.ones(2).to(device).device == aotjax.device("cpu")
    for call in (aotjax.cuda.current_device, aotjax.cuda.get_device_name, lambda: aotjax.ones(2).cuda(),
                 lambda: aotjax.nn.Linear(2, 2).cuda()):
        with pytest.raises(RuntimeError, match="No CUDA GPUs are available .*test_amp.py"):
            call()
    aotjax.cuda.manual_seed_all(3)
    a = aotjax.rand(2)
    aotjax.manual_seed(3)
    np.testing.assert_array_equal(np.asarray(a.numpy()), np.asarray(aotjax.rand(2).numpy()))
    aotjax.cuda.synchronize()
    x = aotjax.ones(2)
    assert x.cpu() is x and not x.is_cuda and aotjax.nn.Linear(2, 2).cpu() is not None
    assert not aotjax.backends.mps.is_available()
    aotjax.backends.cudnn.benchmark = True
    assert aotjax.backends.cudnn.benchmark
    before = aotjax.get_float32_matmul_precision()
    try:
        aotjax.backends.cuda.matmul.allow_tf32 = True
        assert aotjax.get_float32_matmul_precision() == "high" and aotjax.backends.cuda.matmul.allow_tf32
        aotjax.set_float32_matmul_precision("highest")
        assert not aotjax.backends.cuda.matmul.allow_tf32
        with pytest.raises(RuntimeError, match="invalid precision"):
            aotjax.set_float32_matmul_precision("fast")
    finally:
        aotjax.set_float32_matmul_precision(before)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        aotjax.backends.cudnn.deterministic = True


def test_accelerator_onnx_and_from_numpy_as_torch_on_a_machine_without_a_gpu():
    import jax
    import torch
    if any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("this machine has a GPU: the shims report it (checked in the GPU benchmark run)")
    ours, theirs = aotjax.accelerator, torch.accelerator
    assert (ours.is_available(), ours.current_accelerator(), ours.device_count()) == \
        (theirs.is_available(), theirs.current_accelerator(), theirs.device_count())
    device = ours.current_accelerator() if ours.is_available() else aotjax.device("cpu")  # NOTE: the examples' idiom
    assert aotjax.ones(2).to(device).device == aotjax.device("cpu")
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available.*test_amp.py"):
        ours.current_device_index()
    ours.synchronize()
    assert not aotjax.onnx.is_in_onnx_export()
    with pytest.raises(aotjax.core.errors.UnsupportedError, match="does not write ONNX.*aotjax.export"):
        aotjax.onnx.export(aotjax.nn.Linear(2, 2), aotjax.ones(1, 2), "model.onnx")
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = aotjax.from_numpy(a)
    assert t.dtype == np.int32 and t.shape == (2, 3) and np.array_equal(t.numpy(), a)
    with pytest.raises(TypeError, match="expected np.ndarray"):
        aotjax.from_numpy([1, 2])
    with pytest.raises(TypeError, match="expected np.ndarray"):
        torch.from_numpy([1, 2])


def test_an_aot_function_and_its_grad_follow_the_region_they_are_called_in():
    w = aotjax.tensor(_W)
    f = aotjax.aot(lambda x: (x @ w.t()).tanh().sum())
    x = aotjax.tensor(_X)
    plain, g_plain = f(x), aotjax.grad(f)(x)
    with aotjax.autocast("cpu"):
        low, g_low = f(x), aotjax.grad(f)(x)
    again, g_again = f(x), aotjax.grad(f)(x)
    assert (plain.dtype, low.dtype, again.dtype) == (np.float32, np.dtype("bfloat16"), np.float32)
    np.testing.assert_array_equal(np.asarray(g_again.numpy()), np.asarray(g_plain.numpy()))
    np.testing.assert_allclose(np.asarray(g_low.numpy()), np.asarray(g_plain.numpy()), rtol=5e-2, atol=5e-2)
    assert not np.array_equal(np.asarray(g_low.numpy()), np.asarray(g_plain.numpy()))


def test_deterministic_and_thread_settings_read_back_as_torchs():
    for T in (torch, aotjax):
        before = (T.are_deterministic_algorithms_enabled(), T.is_deterministic_algorithms_warn_only_enabled(),
                  T.get_num_threads())
        try:
            T.use_deterministic_algorithms(True, warn_only=True)
            assert T.are_deterministic_algorithms_enabled() and T.is_deterministic_algorithms_warn_only_enabled()
            T.use_deterministic_algorithms(False)
            assert not T.are_deterministic_algorithms_enabled()
            T.set_num_threads(1)
            assert T.get_num_threads() == 1 and T.get_num_interop_threads() >= 1
            with pytest.raises(RuntimeError):
                T.set_num_threads(0)
        finally:
            T.use_deterministic_algorithms(before[0], warn_only=before[1])
            T.set_num_threads(before[2])
