"""Whole training steps, against PyTorch: an MLP with BatchNorm trained with SGD (momentum) and AdamW gives
torch's parameters, running statistics and `num_batches_tracked`, eagerly, with the step compiled whole
(`jit(train_step)(model, opt, x, y)`) and with the loss compiled by `aot`; `functional_call`'s write-back and tied
weights as torch documents them; `stack_module_state` for a vmapped ensemble; `scan_layers`; `aot_module` of a
Module; and the example language model, whose first steps match torch's and whose loss falls."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

import aotjax
import aotjax.nn as nn
import aotjax.nn.functional as F
from aotjax.func import functional_call, stack_module_state
from tests.helpers import INT
from tests.op_records import as_np

# NOTE: modules compute in the default float (float32) in both modes: run once, in jax's default mode
pytestmark = pytest.mark.slow

RTOL, ATOL = 1e-5, 1e-5  # NOTE: modules compute in float32 (the default float) in both modes, as torch's do
STEPS = 5


def _torch_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 3))


def _ours_like(tm):
    # NOTE: BatchNorm after a smooth activation: a bias right before BatchNorm has a zero gradient, and a dead ReLU
    # unit a near-zero variance, which Adam and the normalization turn into float32 noise
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.BatchNorm1d(8), nn.Linear(8, 3))
    dtype = as_np(aotjax.ones(1)).dtype
    m.load_state_dict({k: v.detach().numpy().astype(dtype) if v.is_floating_point() else v.numpy()
                       for k, v in tm.state_dict().items()})
    return m


def _batches():
    rng = np.random.default_rng(0)
    return [(rng.normal(size=(6, 4)).astype(np.float32), rng.integers(0, 3, size=6)) for _ in range(STEPS)]


OPTIMIZERS = {
    "sgd_momentum": (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3),
                     lambda p: aotjax.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3)),
    "adamw": (lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.05),
              lambda p: aotjax.optim.AdamW(p, lr=1e-2, weight_decay=0.05)),
}


def _torch_trained(make_opt):
    tm = _torch_mlp()
    start = {k: v.clone() for k, v in tm.state_dict().items()}
    opt = make_opt(tm.parameters())
    for x, y in _batches():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y)).backward()
        opt.step()
    return start, tm.state_dict()


def _loss(model, params, x, y):
    return F.cross_entropy(functional_call(model, params, (x,)), y)


def train_step(model, opt, x, y):
    params = dict(model.named_parameters())
    loss, grads = aotjax.value_and_grad(lambda p: _loss(model, p, x, y))(params)
    opt.step(grads)
    return loss


def _run(way, model, opt):
    if way == "eager":
        step = train_step
    elif way == "jit(train_step)":
        step = aotjax.jit(train_step)
    else:  # grad(aot(loss)): the loss compiled as a forward and a backward program
        loss = aotjax.aot(lambda p, x, y: _loss(model, p, x, y))

        def step(model, opt, x, y):
            opt.step(aotjax.grad(loss)(dict(model.named_parameters()), x, y))
    for x, y in _batches():
        step(model, opt, aotjax.tensor(x), aotjax.tensor(y.astype(INT)))
    return step


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("way", ["eager", "jit(train_step)", "grad(aot(loss))"])
def test_an_mlp_with_batchnorm_trains_as_in_torch(optimizer, way):
    torch_opt, our_opt = OPTIMIZERS[optimizer]
    start, expected = _torch_trained(torch_opt)
    tm = _torch_mlp()
    tm.load_state_dict(start)
    model = _ours_like(tm)
    opt = our_opt(model.named_parameters())
    step = _run(way, model, opt)
    got = model.state_dict()
    assert list(got) == list(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(as_np(got[name]), value.numpy(), rtol=RTOL, atol=ATOL, err_msg=name)
    assert int(got["2.num_batches_tracked"]) == STEPS
    if way == "jit(train_step)":
        assert step.trace_count == 1  # compiled once: parameters, state and statistics written back in place


def test_functional_call_writes_into_the_dict_and_follows_tied_weights_as_torch_documents():
    class Foo(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("foo", aotjax.zeros(()))

        def forward(self, x):
            self.foo = self.foo + 1
            return x + self.foo

    mod = Foo()
    a = {"foo": aotjax.zeros(())}
    functional_call(mod, a, aotjax.ones(()))
    assert float(mod.foo) == 0.0 and float(a["foo"]) == 1.0

    class InPlace(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", aotjax.zeros(()))

        def forward(self, x):
            self.count.add_(1)
            return x * 2

    m, d = InPlace(), {"count": aotjax.zeros(())}
    functional_call(m, d, aotjax.ones(()))
    assert float(d["count"]) == 1.0 and float(m.count) == 0.0

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.foo = nn.Parameter(aotjax.ones(()))
            self.foo_tied = self.foo

        def forward(self, x):
            return x + self.foo + self.foo_tied

    tied = Tied()
    assert float(tied(aotjax.zeros(()))) == 2.0
    assert float(functional_call(tied, {"foo": aotjax.zeros(())}, aotjax.zeros(()))) == 0.0
    assert float(functional_call(tied, {"foo": aotjax.zeros(())}, aotjax.zeros(()), tie_weights=False)) == 1.0
    with pytest.raises(ValueError, match="tied weights"):
        functional_call(tied, {"foo": aotjax.zeros(()), "foo_tied": aotjax.ones(())}, aotjax.zeros(()))
    with pytest.raises(RuntimeError, match="missing key"):
        functional_call(tied, {}, aotjax.zeros(()), strict=True)
    assert float(tied.foo) == 1.0  # the module's own tensors are untouched


def test_an_ensemble_by_vmap_over_stacked_module_state():
    aotjax.manual_seed(0)
    models = [nn.Linear(3, 2) for _ in range(4)]
    params, buffers = stack_module_state(models)
    x = aotjax.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = aotjax.vmap(lambda p, b: functional_call(models[0], (p, b), (x,)), in_axes=(0, 0))(params, buffers)
    expected = np.stack([as_np(m(x)) for m in models])
    np.testing.assert_allclose(as_np(out), expected, rtol=1e-6, atol=1e-6)


class _Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return x + self.lin(self.bn(x)).tanh()


class _Stack(nn.Module):
    def __init__(self, depth: int, scanned: bool):
        super().__init__()
        self.layers = nn.ModuleList([_Layer() for _ in range(depth)])
        self.scanned = scanned

    def forward(self, x):
        if self.scanned:
            return nn.scan_layers(self.layers, x)
        for layer in self.layers:
            x = layer(x)
        return x


def test_scan_layers_is_the_python_loop_with_its_gradients_and_buffer_updates():
    aotjax.manual_seed(1)
    looped, scanned = _Stack(3, scanned=False), _Stack(3, scanned=True)
    scanned.load_state_dict(looped.state_dict())
    x = aotjax.tensor(np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32))

    def grads(model):
        loss = lambda p: (functional_call(model, p, (x,)) ** 2).sum()  # noqa: E731
        return aotjax.grad(loss)(dict(model.named_parameters()))

    want, got = grads(looped), grads(scanned)
    assert list(got) == list(want)
    for name in want:
        np.testing.assert_allclose(as_np(got[name]), as_np(want[name]), rtol=RTOL, atol=ATOL, err_msg=name)
    for name, value in looped.state_dict().items():  # the running statistics each layer's BatchNorm wrote
        np.testing.assert_allclose(as_np(scanned.state_dict()[name]), as_np(value), rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    assert int(scanned.layers[2].bn.num_batches_tracked) == 1
    with pytest.raises(ValueError, match="every layer must be like the first"):
        nn.scan_layers(nn.ModuleList([_Layer(), nn.Linear(4, 4)]), x)


def test_aot_module_compiles_a_module_and_writes_its_buffers_back():
    aotjax.manual_seed(2)
    model = nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.ReLU())
    compiled = aotjax.aot_module(model)
    x = aotjax.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    before = as_np(model[1].running_mean).copy()
    want = as_np(model(x))
    after_eager = as_np(model[1].running_mean).copy()
    model[1].running_mean.copy_(aotjax.tensor(before))
    model[1].num_batches_tracked.zero_()
    np.testing.assert_allclose(as_np(compiled(x)), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(as_np(model[1].running_mean), after_eager, rtol=1e-6, atol=1e-7)
    assert int(model[1].num_batches_tracked) == 1


# -- the example ---------------------------------------------------------------------------------------
EXAMPLE = Path(__file__).parent.parent / "examples" / "char_transformer.py"


def _example():
    spec = importlib.util.spec_from_file_location("char_transformer", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_example_language_model_trains_and_its_loss_falls(tmp_path):
    ex = _example()
    _, losses, _ = ex.train(steps=40, context=16, batch=8, limit=400, progress=False)
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])
    ex.plot(losses, tmp_path / "loss.png")
    assert (tmp_path / "loss.png").stat().st_size > 1000


def _torch_char_transformer(vocab: int, context: int, width: int = 32, heads: int = 4, depth: int = 2):
    """The example's model, in torch (dropout off)."""
    tnn = torch.nn

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = tnn.LayerNorm(width)
            self.attn = tnn.MultiheadAttention(width, heads, batch_first=True)
            self.ln2 = tnn.LayerNorm(width)
            self.mlp = tnn.Sequential(tnn.Linear(width, 4 * width), tnn.GELU(), tnn.Linear(4 * width, width),
                                      tnn.Dropout(0.0))

        def forward(self, x, mask):
            h = self.ln1(x)
            a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
            x = x + a
            return x + self.mlp(self.ln2(x))

    class Model(tnn.Module):
        def __init__(self):
            super().__init__()
            self.tok = tnn.Embedding(vocab, width)
            self.pos = tnn.Embedding(context, width)
            self.drop = tnn.Dropout(0.0)
            self.blocks = tnn.ModuleList([Block() for _ in range(depth)])
            self.ln = tnn.LayerNorm(width)
            self.head = tnn.Linear(width, vocab)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.drop(self.tok(idx) + self.pos(torch.arange(t)))
            mask = torch.ones(t, t).triu(1).bool()
            for block in self.blocks:
                x = block(x, mask)
            return self.head(self.ln(x))

    return Model()


@pytest.mark.slow
def test_the_example_model_first_steps_match_torch():
    ex = _example()
    aotjax.manual_seed(0)
    data, chars = ex.load_text(limit=300)
    model = ex.CharTransformer(len(chars), context=12, dropout=0.0)
    tm = _torch_char_transformer(len(chars), 12)
    tm.load_state_dict({k: torch.tensor(as_np(v).astype(np.float32)) for k, v in model.state_dict().items()})
    opt = aotjax.optim.AdamW(model.named_parameters(), lr=3e-3, weight_decay=0.01)
    topt = torch.optim.AdamW(tm.parameters(), lr=3e-3, weight_decay=0.01)
    step = aotjax.jit(ex.train_step)
    stream = ex.batches(data, 12, 4, np.random.default_rng(0))
    for _ in range(3):
        x, y = next(stream)
        loss = float(step(model, opt, x, y))
        topt.zero_grad()
        tl = torch.nn.functional.cross_entropy(tm(torch.tensor(as_np(x)).long()).reshape(-1, len(chars)),
                                               torch.tensor(as_np(y)).long().reshape(-1))
        tl.backward()
        topt.step()
        np.testing.assert_allclose(loss, tl.item(), rtol=1e-5)
    for name, value in tm.state_dict().items():
        got, want = as_np(model.state_dict()[name]), value.numpy()
        if name.endswith("attn.in_proj_bias"):  # NOTE: the keys' bias has a zero gradient (softmax ignores a shift
            keep = np.ones(len(want), bool)      # common to all keys), which AdamW turns into rounding noise
            keep[len(want) // 3: 2 * len(want) // 3] = False
            got, want = got[keep], want[keep]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)


def test_a_module_captured_by_a_compiled_function_is_read_at_every_call_and_written_back():
    fc = nn.Linear(2, 1, bias=False)
    bn = nn.BatchNorm1d(1)
    with aotjax.no_grad():
        fc.weight.copy_(aotjax.ones(1, 2))
    x = aotjax.tensor([[1.0, 2.0], [3.0, -1.0]])

    def loss(x):
        return (bn(fc(x)) * fc(x)).sum()

    ways = {"jit": aotjax.jit(loss), "aot": aotjax.aot(loss), "grad(aot)": aotjax.grad(aotjax.aot(loss)),
            "aot(grad)": aotjax.aot(aotjax.grad(loss))}
    for how, f in ways.items():
        reference = loss if how in ("jit", "aot") else aotjax.grad(loss)
        for scale in (1.0, 5.0):
            with aotjax.no_grad():
                fc.weight.copy_(aotjax.full((1, 2), scale))
            stats = as_np(bn.running_mean).copy(), int(bn.num_batches_tracked)
            got = as_np(f(x))
            after = as_np(bn.running_mean).copy()
            bn.running_mean.copy_(aotjax.tensor(stats[0]))
            bn.num_batches_tracked.fill_(stats[1])
            want = as_np(reference(x))
            np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"{how}, weight {scale}")
            np.testing.assert_allclose(after, as_np(bn.running_mean), rtol=1e-6, err_msg=f"{how}: written back")
