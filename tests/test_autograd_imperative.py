"""Imperative autograd (`requires_grad`, `backward()`, `.grad`, `autograd.grad`) against PyTorch: each program is
written once against a library `T` (aotjax or torch) and run on both; every returned value (gradients, values,
error markers) must agree."""
import warnings

import numpy as np
import pytest
import torch

import aotjax


def _np(x):
    if isinstance(x, (aotjax.Tensor, torch.Tensor)):
        return np.asarray(x.detach().numpy() if isinstance(x, torch.Tensor) else x.detach().numpy())
    return x


def _agree(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if b is None or isinstance(b, (str, bool, int)):
            assert a == b, (a, b)
        else:
            np.testing.assert_allclose(_np(a), _np(b), rtol=2e-5, atol=2e-6)


def raises(fn, T, cls=RuntimeError):
    try:
        fn()
    except cls:
        return f"{cls.__name__}"
    return "no error"


# -- the programs ------------------------------------------------------------------------------------------------
def views_and_inplace(T):
    x = T.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = x * 2
    v = y[1:3]
    v.mul_(x[:2])
    y.t_() if y.ndim == 2 else None
    (y.sin().sum() + v.sum()).backward()
    return [x.grad, y]


def transpose_view_write(T):
    w = T.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    a = w * 1.0
    a.t()[1].add_(w[0, :2] ** 2)
    col = a[:, 0]
    (a.exp().sum() * col.sum()).backward()
    return [w.grad, a]


def no_grad_sgd(T):
    w = T.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(3):
        loss = (w * w * w).sum()
        loss.backward()
        with T.no_grad():
            w -= 0.1 * w.grad
        w.grad.zero_()
    return [w, w.grad, w.requires_grad, w.is_leaf]


def detach_write(T):
    x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1.5
    y.detach().mul_(2)
    (y * x).sum().backward()
    return [x.grad, y]


def data_write(T):
    x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.sin()  # NOTE: not exp, whose torch backward reads its saved output, which `.data` writes changed
    y.data.mul_(0.5)
    (y * x).sum().backward()
    return [x.grad, y.requires_grad]


def no_grad_write_keeps_graph(T):
    x = T.tensor([1.0, -2.0], requires_grad=True)
    y = x * 3
    with T.no_grad():
        y[0] = 100.0
    (y * 2).sum().backward()
    return [x.grad, y]


def write_recording_into_plain(T):
    w = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
    buf = T.zeros(5)
    buf[1:4] = w * 2
    buf[0] = w[2]
    (buf * T.arange(5.0)).sum().backward()
    return [w.grad, buf, buf.requires_grad, buf.is_leaf]


def hooks_and_retain_grad(T):
    x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.exp()
    y.register_hook(lambda g: g * 3)
    y.retain_grad()
    h = (y * y)
    h.register_hook(lambda g: g + 1)
    x.register_hook(lambda g: g / 2)
    h.sum().backward()
    return [x.grad, y.grad]


def double_backward(T):
    x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x ** 3).sin().sum()
    (g,) = T.autograd.grad(y, x, create_graph=True)
    (g * g).sum().backward()
    return [x.grad, g]


def accumulation(T):
    x = T.tensor([1.0, 2.0], requires_grad=True)
    for i in range(3):
        (x * (i + 1)).sum().backward()
    return [x.grad]


def retain_graph(T):
    x = T.tensor([1.0, 2.0], requires_grad=True)
    y = (x.sin() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    return [x.grad, raises(y.backward, T)]


def leaf_inplace_refused(T):
    x = T.tensor([1.0, 2.0], requires_grad=True)
    return [raises(lambda: x.add_(1), T), raises(lambda: x[0].mul_(2), T), x]


def autograd_grad_of_intermediate(T):
    x = T.tensor([0.5, 1.5], requires_grad=True)
    h = x.tanh()
    out = (h * h * x).sum()
    gh, gx = T.autograd.grad(out, [h, x])
    return [gh, gx, x.grad]


def unused_input(T):
    x = T.tensor([1.0], requires_grad=True)
    z = T.tensor([1.0], requires_grad=True)
    y = (x * 2).sum()
    (gz,) = T.autograd.grad(y, z, allow_unused=True, retain_graph=True)
    return [gz, raises(lambda: T.autograd.grad(y, z), T)]


def nonscalar(T):
    x = T.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    err = raises(y.backward, T)
    y.backward(T.tensor([1.0, 0.5]))
    return [err, x.grad]


def backward_inputs(T):
    a = T.tensor([1.0, 2.0], requires_grad=True)
    b = T.tensor([3.0], requires_grad=True)
    (a * b).sum().backward(inputs=[b])
    return [a.grad, b.grad]


def requires_grad_flags(T):
    x = T.ones(2)
    p = T.ones(2, requires_grad=True)
    y = x * p
    z = y.detach()
    with T.no_grad():
        w = p * 2
    return [x.requires_grad, x.is_leaf, p.is_leaf, y.requires_grad, y.is_leaf, z.requires_grad, w.requires_grad,
            y.grad_fn is None, p.grad_fn is None, raises(lambda: T.ones(2, dtype=T.int32).requires_grad_(), T),
            raises(lambda: y.requires_grad_(False), T)]


def detach_inplace(T):
    x = T.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.detach_()
    z = (x * 3).sum()
    z.backward()
    return [y.requires_grad, x.grad]


def multiple_outputs_and_integer(T):
    x = T.tensor([[3.0, 1.0], [2.0, 5.0]], requires_grad=True)
    vals, idx = x.max(dim=1)
    (vals * T.tensor([1.0, 2.0])).sum().backward()
    return [x.grad, idx.requires_grad]


def deepcopies(T):
    import copy
    x = T.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    y = copy.deepcopy(x)  # NOTE: a leaf that requires grad, with a copy of its .grad
    (y * 2).sum().backward()
    base = T.arange(6.0)
    b2, v2 = copy.deepcopy((base, base[1:3]))  # NOTE: views of one storage stay views of one new storage
    v2.add_(10)
    model = T.nn.Linear(2, 2)
    best = copy.deepcopy(model.state_dict())
    with T.no_grad():
        model.weight.add_(1)
    model.load_state_dict(best)
    return [y.grad, x.grad, y.requires_grad, y.is_leaf, b2, base, (model.weight - best["weight"]).abs().sum(),
            raises(lambda: copy.deepcopy(x * 2), T)]


def frozen_parameters_keep_their_grad(T):
    # NOTE: a GAN's pattern: the discriminator frozen (requires_grad = False) while the generator's backward runs
    w = T.nn.Parameter(T.tensor([1.0, -2.0]))
    (w * 2).sum().backward()
    w.requires_grad = False
    kept = w.grad.clone()
    T.optim.SGD([w], lr=0.1).step()  # NOTE: a parameter with a .grad is stepped, whether it requires grad or not
    stepped = w.detach().clone()
    w.requires_grad = True
    (w * 3).sum().backward()  # NOTE: accumulates into the kept .grad
    accumulated = w.grad.clone()
    w.requires_grad_(False)
    opt = T.optim.SGD([w], lr=0.1)
    opt.zero_grad()
    plain = T.ones(2)
    plain.grad = T.full((2,), 5.0)  # NOTE: any tensor may hold an assigned .grad
    return [kept, stepped, accumulated, w.grad, plain.grad, plain.requires_grad]


def mlp_training(T, opt_name):
    T.manual_seed(0)
    model = T.nn.Sequential(T.nn.Linear(4, 8), T.nn.Tanh(), T.nn.Linear(8, 3))
    with T.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(T.tensor(np.random.default_rng(i).standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))
    opt = {"sgd": lambda ps: T.optim.SGD(ps, lr=0.1, momentum=0.9),
           "adam": lambda ps: T.optim.Adam(ps, lr=0.01),
           "adamw": lambda ps: T.optim.AdamW(ps, lr=0.01, weight_decay=0.1)}[opt_name](model.parameters())
    rng = np.random.default_rng(7)
    xs = T.tensor(rng.standard_normal((6, 4)).astype(np.float32))
    ys = T.tensor(rng.integers(0, 3, 6).astype(np.int64))
    losses = []
    for _ in range(4):
        opt.zero_grad()
        for k in range(2):  # gradient accumulation over two micro-batches
            loss = T.nn.functional.cross_entropy(model(xs[3 * k:3 * k + 3]), ys[3 * k:3 * k + 3]) / 2
            loss.backward()
        opt.step()
        losses.append(loss.item())
    return [T.tensor(losses), *[p for p in model.parameters()], *[p.grad for p in model.parameters()]]


PROGRAMS = [views_and_inplace, transpose_view_write, no_grad_sgd, detach_write, data_write, no_grad_write_keeps_graph,
            write_recording_into_plain, hooks_and_retain_grad, double_backward, accumulation, retain_graph,
            leaf_inplace_refused, autograd_grad_of_intermediate, unused_input, nonscalar, backward_inputs,
            requires_grad_flags, detach_inplace, multiple_outputs_and_integer, deepcopies,
            frozen_parameters_keep_their_grad]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_imperative_autograd_matches_pytorch(program):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        _agree(program(aotjax), program(torch))


@pytest.mark.parametrize("opt_name", ["sgd", "adam", "adamw"])
def test_a_training_loop_as_written_matches_pytorch(opt_name):
    _agree(mlp_training(aotjax, opt_name), mlp_training(torch, opt_name))


def test_a_value_saved_for_backward_then_overwritten_gives_the_gradient_at_the_saved_value():
    # NOTE: torch raises ("modified by an inplace operation"); aotjax keeps saved values immutably and computes the
    # gradient of the forward that ran: d/dx sum((x*1)**2) at the value the square saw
    x = aotjax.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    z = y * y
    with aotjax.no_grad():
        y.mul_(10)
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_the_graph_is_freed_and_a_second_backward_says_so():
    x = aotjax.tensor([1.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_grad_of_a_non_leaf_warns():
    x = aotjax.tensor([1.0], requires_grad=True)
    y = x * 2
    with pytest.warns(UserWarning, match="not a leaf"):
        assert y.grad is None


def test_an_exception_in_a_hook_leaves_every_grad_as_it_was():
    x = aotjax.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    before = x.grad.numpy().copy()
    y = x.exp()

    def boom(g):
        raise ValueError("hook failed")
    y.register_hook(boom)
    with pytest.raises(ValueError, match="hook failed"):
        (y * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), before)


def sanitizing_hook(T):
    # NOTE: the hook zeroes the infinite gradient of log at 0; x has a second path around the hooked node
    x = T.tensor([0.0, 1.0, 4.0], requires_grad=True)
    s = x * 1
    s.register_hook(lambda g: T.where(T.isinf(g), T.zeros_like(g), g))
    (s.log().sum() + (x * x).sum()).backward()
    return [x.grad]


def replacing_hooks_in_a_chain(T):
    # NOTE: elementwise arithmetic only (bitwise the same in both libraries); a hook runs once per backward, sees
    # the gradient as the later hooks left it, and every leaf has at most two paths to sum
    x = T.tensor([0.25, -0.5, 2.0, 1.5], requires_grad=True)
    w = T.tensor([0.3, -0.7, 1.1, 0.123456], requires_grad=True)
    calls = []
    y = x * w
    y.register_hook(lambda g: (calls.append("y"), g.clamp(-0.31, 0.31))[1])
    z = y * 3.7 + x
    z.retain_grad()
    z.register_hook(lambda g: (calls.append("z"), g * 0.3)[1])
    u = z * z
    u.register_hook(lambda g: (calls.append("u"), g - 0.1)[1])
    (u * 1.3).sum().backward()
    return [x.grad, w.grad, z.grad, ",".join(calls)]


@pytest.mark.parametrize("program", [sanitizing_hook, replacing_hooks_in_a_chain], ids=lambda p: p.__name__)
def test_hooks_that_replace_gradients_give_exactly_torchs_gradients(program):
    # NOTE: the gradient a hook returns is what flows on, as torch's engine passes it (not the first gradient plus a
    # propagated difference, which is off in the last bit and gives inf - inf = nan for a hook that zeroes an inf)
    ours, theirs = program(aotjax), program(torch)
    for a, b in zip(ours, theirs):
        if isinstance(b, str):
            assert a == b
        else:
            np.testing.assert_array_equal(_np(a), _np(b))


def test_a_module_hook_that_scales_grad_input_gives_exactly_the_scaled_gradient():
    for seed in range(8):
        aotjax.manual_seed(seed)
        fc = aotjax.nn.Linear(3, 1)
        x = aotjax.ones(1, 3, requires_grad=True)
        fc.register_full_backward_hook(lambda m, grad_input, grad_output: (grad_input[0] * 10,))
        fc(x).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), fc.weight.detach().numpy() * np.float32(10))


def test_a_replacing_hook_under_create_graph_differentiates_again_as_torch():
    def program(T):
        x = T.tensor([0.5, -1.0, 2.0], requires_grad=True)
        y = x * x
        y.register_hook(lambda g: g * y)  # NOTE: the replacement depends on x: the second backward sees it
        (g,) = T.autograd.grad((y * x).sum(), x, create_graph=True)
        g.sum().backward()
        return [g, x.grad]
    _agree(program(aotjax), program(torch))


@pytest.mark.parametrize("result, error", [(lambda g: aotjax.ones(5), "changed the size"),
                                           (lambda g: 2.0, "expected Tensor")])
def test_a_hook_that_returns_no_gradient_of_the_right_shape_raises_as_torch(result, error):
    x = aotjax.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(result)
    with pytest.raises((RuntimeError, TypeError), match=error):
        y.sum().backward()
    assert x.grad is None


def test_a_compiled_step_refuses_to_reset_a_frozen_parameters_kept_grad():
    from aotjax.core.errors import UnsupportedError
    model = aotjax.nn.Linear(2, 1)
    model(aotjax.ones(2)).sum().backward()
    model.bias.requires_grad = False  # NOTE: keeps its .grad, eager state the compiled step would have to write
    opt = aotjax.optim.SGD(model.parameters(), lr=0.1)

    @aotjax.jit
    def step(x):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()

    with pytest.raises(UnsupportedError, match=r"kept from when it did.*set it \(p.grad = None\) before"):
        step(aotjax.ones(2))
    model.bias.grad = None
    step(aotjax.ones(2))
    assert model.bias.grad is None and model.weight.grad.tolist() == [[1.0, 1.0]]


def test_anomaly_detection_names_the_node_that_made_a_nan_as_torch():
    def program(T):
        out = []
        x = T.tensor([0.0, 1.0], requires_grad=True)
        w = T.tensor([2.0, 3.0], requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with T.autograd.detect_anomaly():
                for loss in (lambda: (x.sqrt() * 0 + w * x).sum(),  # NOTE: 0 * inf in sqrt's backward
                             lambda: (T.log(x) * w).sum(),  # NOTE: infinite gradients, no nan
                             lambda: (x * 0 / x).sum()):  # NOTE: the nan is the divisor's gradient
                    try:
                        loss().backward()
                        out.append("no error")
                    except RuntimeError as e:
                        out.append(str(e).split(" (at ")[0])
        with T.autograd.set_detect_anomaly(True):
            out.append(T.is_anomaly_enabled())
        out.append(T.is_anomaly_enabled())
        (x.sqrt() * 0).sum().backward()  # NOTE: off again: not checked
        return out
    assert program(aotjax) == program(torch)


def test_grad_fn_names_and_next_functions():
    x = aotjax.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 3).sum()
    assert y.grad_fn.name().endswith("Backward0")
    (mul_fn, _), = y.grad_fn.next_functions
    assert mul_fn.name() == "MulBackward0"
    assert any(getattr(f, "variable", None) is x for f, _ in mul_fn.next_functions)
    assert repr(x) == "tensor([1., 2.], requires_grad=True)"
    assert "grad_fn=<MulBackward0>" in repr(x * 3)


def test_the_eager_backward_compiles_once_per_graph_structure():
    from aotjax.autograd import engine
    w = aotjax.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    traces = []
    for i in range(3):
        x = aotjax.tensor([[float(i), 1.0]])
        loss = (x @ w).tanh().sum()
        loss.backward()
        fn = engine._programs[next(reversed(engine._programs))]
        traces.append(fn.trace_count)
    assert traces == [1, 1, 1]


def test_module_training_step_with_batchnorm_and_dropout_off_matches_torch():
    def run(T):
        T.manual_seed(0)
        net = T.nn.Sequential(T.nn.Conv2d(1, 2, 3), T.nn.BatchNorm2d(2), T.nn.ReLU(), T.nn.Flatten(),
                              T.nn.Linear(8, 2))
        with T.no_grad():
            for i, p in enumerate(net.parameters()):
                p.copy_(T.tensor(np.random.default_rng(i).standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
        opt = T.optim.SGD(net.parameters(), lr=0.05)
        x = T.tensor(np.random.default_rng(3).standard_normal((4, 1, 4, 4)).astype(np.float32))
        for _ in range(2):
            opt.zero_grad()
            loss = net(x).pow(2).mean()
            loss.backward()
            opt.step()
        return [*net.parameters(), net[1].running_mean, net[1].running_var]
    _agree(run(aotjax), run(torch))


# -- the whole step compiled ----------------------------------------------------------------------------------------
def _step_program(T, compile_step, zero_first: bool, steps: int = 4):
    T.manual_seed(0)
    m = T.nn.Sequential(T.nn.Linear(3, 5), T.nn.Tanh(), T.nn.Linear(5, 2))
    with T.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(T.tensor(np.random.default_rng(i).standard_normal(tuple(p.shape)).astype(np.float32)))
    opt = T.optim.AdamW(m.parameters(), lr=0.01)

    def step(x, y):
        if zero_first:
            opt.zero_grad()
        loss = T.nn.functional.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        if not zero_first:
            opt.zero_grad()
        return loss.detach()

    run = compile_step(step)
    rng = np.random.default_rng(3)
    losses = []
    for _ in range(steps):
        x = T.tensor(rng.standard_normal((4, 3)).astype(np.float32))
        y = T.tensor(rng.standard_normal((4, 2)).astype(np.float32))
        losses.append(float(run(x, y)))
    return [T.tensor(losses), *m.parameters(), *[p.grad is None for p in m.parameters()]], run


@pytest.mark.parametrize("zero_first", [True, False], ids=["zero_grad-first", "zero_grad-last"])
def test_a_whole_step_with_backward_under_jit_is_one_program_traced_once_and_matches_torch(zero_first):
    ours, run = _step_program(aotjax, aotjax.jit, zero_first)
    theirs, _ = _step_program(torch, lambda f: f, zero_first)
    _agree(ours, theirs)
    assert run.trace_count == 1


def test_gradients_accumulate_across_calls_of_a_compiled_backward():
    def run(T, compile_fn):
        w = T.tensor([1.0, -2.0], requires_grad=True)
        f = compile_fn(lambda x: (w * w * x).sum().backward())
        for i in range(3):
            f(T.tensor([float(i + 1), 1.0]))
        return [w.grad, w]
    _agree(run(aotjax, aotjax.jit), run(torch, lambda f: f))


@pytest.mark.parametrize("make", [
    lambda lib: lib.arange(6.0).reshape(2, 3),
    lambda lib: lib.linspace(-1.0, 1.0, 12).view(4, 3).t(),
    lambda lib: lib.arange(8.0)[2:].unsqueeze(0),
])
def test_a_view_of_data_nothing_else_holds_becomes_a_leaf_as_in_torch(make):
    ours, theirs = make(aotjax).requires_grad_(), make(torch).requires_grad_()
    assert ours.is_leaf and ours.requires_grad and ours.shape == tuple(theirs.shape)
    for x in (ours, theirs):
        (x.sin() * x).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6)
    assert ours.grad.stride() == theirs.grad.stride()


def test_a_view_of_data_still_in_use_cannot_become_a_leaf():
    base = aotjax.zeros(4)
    view = base[1:]
    with pytest.raises(RuntimeError, match="view of another tensor's data, which is still in use"):
        view.requires_grad_()
    assert not base.requires_grad and not view.requires_grad
