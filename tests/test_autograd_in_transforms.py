"""Imperative autograd across aotjax's transforms, against PyTorch: `autograd.grad` inside `vmap` (per-example
gradients), inside `scan` bodies and `cond` branches, `backward()` inside `checkpoint`, the functional transforms
(`aotjax.func.grad`) composed with an outer `backward()`, double backward through 0-d tensors, and the layout a
`.grad` gets. Each program is written once against a library `T` and run on both where PyTorch has the same API;
where it has none (`scan`, `cond`), the PyTorch side is the loop it means."""
import numpy as np
import pytest
import torch

import aotjax
from aotjax.core.errors import UnsupportedError


def _close(ours, theirs, rtol=2e-5, atol=2e-6):
    np.testing.assert_allclose(np.asarray(ours.detach().numpy()), theirs.detach().numpy(), rtol=rtol, atol=atol)


# -- the functional transforms inside an imperative graph -------------------------------------------------------
def func_grad_then_backward(T, x0):
    w = T.tensor([1.0, -2.0, 0.5], requires_grad=True)
    g = T.func.grad(lambda x: ((x * w).sum() ** 2 + (x * w).tanh().sum()))(T.tensor(x0))
    (g * T.tensor([1.0, 2.0, 3.0])).sum().backward()
    return g, w.grad


def func_grad_of_scalar_leaf(T, x0):
    s = T.tensor(1.5, requires_grad=True)  # NOTE: a 0-d leaf: the linearization keeps it a residual
    g = T.func.grad(lambda x: (s * x).sin().sum() * s)(T.tensor(x0))
    g.sum().backward()
    return g, s.grad


def double_backward_of_scalar_leaf(T, _):
    x = T.tensor(2.0, requires_grad=True)
    y = x ** 3 + x.sin()
    (g,) = T.autograd.grad(y, x, create_graph=True)
    g.backward()
    return g, x.grad


@pytest.mark.parametrize("program", [func_grad_then_backward, func_grad_of_scalar_leaf,
                                     double_backward_of_scalar_leaf], ids=lambda p: p.__name__)
def test_functional_transforms_inside_the_recording_match_torch(program):
    x0 = [0.3, -0.7, 1.1]
    ours, theirs = program(aotjax, x0), program(torch, x0)
    for a, b in zip(ours, theirs, strict=True):
        _close(a, b)
    assert ours[0].requires_grad == theirs[0].requires_grad


def test_a_stop_gradient_result_does_not_require_grad():
    w = aotjax.tensor([1.0, 2.0], requires_grad=True)
    assert (w * 2).requires_grad
    assert not aotjax.stop_gradient(w * 2).requires_grad


# -- autograd.grad inside vmap: per-example gradients -----------------------------------------------------------
_XS = [[1.0, 0.0, 2.0], [0.5, -1.0, 0.0], [0.0, 3.0, -0.5], [1.0, 1.0, 1.0]]


def _per_example_loss(T, w, x):
    return ((w * x).sum().tanh() - 0.25) ** 2 + (w ** 2 * x).sum()


def _torch_per_example():
    w = torch.tensor([0.3, -0.2, 0.7], requires_grad=True)
    return torch.stack([torch.autograd.grad(_per_example_loss(torch, w, torch.tensor(x)), w)[0] for x in _XS])


@pytest.mark.parametrize("wrap", ["vmap", "jit(vmap)", "vmap(jit)"])
def test_autograd_grad_inside_vmap_gives_per_example_gradients(wrap):
    w = aotjax.tensor([0.3, -0.2, 0.7], requires_grad=True)

    def per_example(x):
        (g,) = aotjax.autograd.grad(_per_example_loss(aotjax, w, x), w)
        return g

    fn = {"vmap": aotjax.vmap(per_example), "jit(vmap)": aotjax.jit(aotjax.vmap(per_example)),
          "vmap(jit)": aotjax.vmap(aotjax.jit(per_example))}[wrap]
    _close(fn(aotjax.tensor(_XS)), _torch_per_example())
    assert w.grad is None


def test_autograd_grad_inside_vmap_of_a_batched_leaf_argument():
    xs = aotjax.tensor(_XS, requires_grad=True)
    out = aotjax.vmap(lambda x: aotjax.autograd.grad((x ** 3).sum() + x.prod(), x)[0])(xs)
    theirs = torch.tensor(_XS, requires_grad=True)
    expected = torch.stack([torch.autograd.grad((x ** 3).sum() + x.prod(), x)[0]
                            for x in (theirs[i].detach().requires_grad_() for i in range(len(_XS)))])
    _close(out, expected)


def test_backward_inside_vmap_is_refused_with_what_to_do_instead():
    w = aotjax.tensor([0.3, -0.2, 0.7], requires_grad=True)

    def step(x):
        loss = _per_example_loss(aotjax, w, x)
        loss.backward()
        return loss

    with pytest.raises(RuntimeError,
                       match=r"backward\(\) called inside vmap \(at test_autograd_in_transforms.py.*autograd.grad"):
        aotjax.vmap(step)(aotjax.tensor(_XS))
    assert w.grad is None


# -- inside control flow bodies ----------------------------------------------------------------------------------
def test_autograd_grad_inside_a_scan_body_matches_the_torch_loop():
    w = aotjax.tensor([1.0, 2.0], requires_grad=True)

    def body(h, x):
        (g,) = aotjax.autograd.grad(((h * w + x) ** 2).sum(), w)
        return h - 0.05 * g, g

    h, gs = aotjax.lax.scan(body, aotjax.ones(2), aotjax.tensor([[1.0, 0.5], [-1.0, 2.0], [0.0, 0.3]]))
    wt, ht, expected = torch.tensor([1.0, 2.0], requires_grad=True), torch.ones(2), []
    for x in torch.tensor([[1.0, 0.5], [-1.0, 2.0], [0.0, 0.3]]):
        (g,) = torch.autograd.grad(((ht * wt + x) ** 2).sum(), wt)
        ht = ht - 0.05 * g
        expected.append(g)
    _close(h, ht)
    _close(gs, torch.stack(expected))
    assert w.grad is None


def test_autograd_grad_inside_a_cond_branch():
    w = aotjax.tensor([1.0, 2.0], requires_grad=True)
    out = aotjax.lax.cond(aotjax.tensor(True), lambda a: aotjax.autograd.grad((a * w).sum() ** 2, w)[0],
                          lambda a: a, aotjax.tensor([0.5, -1.0]))
    wt = torch.tensor([1.0, 2.0], requires_grad=True)
    _close(out, torch.autograd.grad((torch.tensor([0.5, -1.0]) * wt).sum() ** 2, wt)[0])


def test_backward_inside_checkpoint_accumulates_into_grad():
    def run(T, region):
        w = T.tensor([0.3, -0.2, 0.7], requires_grad=True)

        def step(x):
            loss = _per_example_loss(T, w, x)
            loss.backward()
            return loss.detach()

        for x in _XS[:2]:
            region(step)(T.tensor(x))
        return w.grad

    ours = run(aotjax, aotjax.checkpoint)
    _close(ours, run(torch, lambda f: f))
    assert not ours.requires_grad


# -- the layout of a .grad ---------------------------------------------------------------------------------------
def test_grad_has_its_parameters_strides():
    def run(T):
        w = T.ones(3, 4, requires_grad=True)
        x = T.ones(2, 3)
        (T.ones(5, 3) @ w).sum().backward()  # NOTE: the backward makes w's gradient as a transpose
        (x @ w).sum().backward()
        return w.grad.stride(), w.grad.is_contiguous()
    assert run(aotjax) == run(torch)


def test_grad_fn_names_are_torchs():
    def names(T):
        x, w, y = T.ones(2, 3, requires_grad=True), T.ones(3, 2), T.zeros(2, 3)
        return [o.grad_fn.name() for o in (x.sum(), x @ w, x.amax(), x * 2, x ** 2, y.copy_(x), x.relu(), x[0],
                                             x.view(6), x.exp())]
    assert names(aotjax) == names(torch)


# -- compiled calls that write in place into a tensor the recording holds ------------------------------------------
@pytest.mark.parametrize("compile_with", ["jit", "aot", "compile"])
def test_a_compiled_call_writing_an_activation_in_place_is_recorded(compile_with):
    def run(T, comp):
        w = T.tensor([1.0, 2.0, -0.5], requires_grad=True)
        a = w * w
        scale = comp(lambda a, b: a[1:].mul_(b.exp()))
        scale(a, T.tensor([0.5, 2.0]))
        (a.sin() * T.tensor([1.0, 2.0, 3.0])).sum().backward()
        return a.detach(), w.grad

    comp = {"jit": aotjax.jit, "aot": aotjax.aot, "compile": aotjax.compile}[compile_with]
    (a, g), (ta, tg) = run(aotjax, comp), run(torch, lambda f: f)
    _close(a, ta)
    _close(g, tg)


def test_a_compiled_call_writing_a_parameter_and_an_activation_is_refused():
    w = aotjax.tensor([1.0, 2.0], requires_grad=True)
    a = w * 2

    @aotjax.jit
    def both(w, a):
        with aotjax.no_grad():
            w.sub_(0.1)
        a.add_(1.0)

    with pytest.raises(UnsupportedError, match="writes in place both a leaf.*test_autograd_in_transforms"):
        both(w, a)


# -- memory --------------------------------------------------------------------------------------------------------
def test_eager_training_holds_no_more_after_each_step():
    """The recording is freed by each backward: over many eager steps the live nodes and device arrays stay flat."""
    import gc

    import jax

    from aotjax.autograd.graph import Node

    aotjax.manual_seed(0)
    model = aotjax.nn.Sequential(aotjax.nn.Linear(4, 8), aotjax.nn.GELU(), aotjax.nn.LayerNorm(8),
                                 aotjax.nn.Linear(8, 2))
    opt = aotjax.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = aotjax.randn(5, 4), aotjax.randn(5, 2)

    def counts():
        gc.collect()
        return sum(isinstance(o, Node) for o in gc.get_objects()), len(jax.live_arrays())

    seen = []
    for step in range(40):
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step in (9, 39):
            del loss
            seen.append(counts())
    assert seen[1][0] <= seen[0][0] and seen[1][1] <= seen[0][1], seen


def test_a_module_converted_to_another_dtype_keeps_its_leaves():
    def run(T):
        m = T.nn.Linear(3, 4)
        with T.no_grad():
            m.weight.copy_(T.tensor(np.arange(12.0, dtype=np.float32).reshape(4, 3) / 10))
            m.bias.zero_()
        m = m.to(T.float16)
        m(T.ones(2, 3, dtype=T.float16)).float().sum().backward()
        m.bfloat16()
        return m.weight.is_leaf, m.weight.requires_grad, str(m.weight.grad.dtype).replace("torch.", ""), \
            np.asarray(m.weight.grad.float().numpy())
    ours, theirs = run(aotjax), run(torch)
    assert ours[:3] == theirs[:3]
    np.testing.assert_allclose(ours[3], theirs[3])


def test_a_compiled_step_reads_the_grad_of_each_call_not_the_one_it_was_traced_with():
    """Gradient accumulation with the update compiled separately: every call of the update reads the `.grad` the
    accumulating calls made then (a new tensor each time), as eager code does."""
    def run(compiled):
        aotjax.manual_seed(0)
        model = aotjax.nn.Linear(3, 2)
        opt = aotjax.optim.SGD(model.parameters(), lr=0.05)

        def micro(x, last):
            ((model(x) ** 2).mean() / 2).backward()
            if last:
                opt.step()
                opt.zero_grad()

        step = aotjax.jit(micro, static_argnums=1) if compiled else micro
        for i in range(6):
            step(aotjax.full((2, 3), i + 1.0), i % 2 == 1)
        return np.asarray(model.weight.detach().numpy())

    np.testing.assert_allclose(run(True), run(False), rtol=1e-6)


def test_backward_inside_an_eager_scan_body_accumulates_as_the_torch_loop():
    xs = [[1.0, 0.5], [-1.0, 2.0], [0.0, 0.3]]
    w = aotjax.tensor([1.0, 2.0], requires_grad=True)

    def body(h, x):
        ((h * w + x) ** 2).sum().backward()
        return h * 0.5, h.sum()

    aotjax.lax.scan(body, aotjax.ones(2), aotjax.tensor(xs))
    wt, ht = torch.tensor([1.0, 2.0], requires_grad=True), torch.ones(2)
    for x in torch.tensor(xs):
        ((ht * wt + x) ** 2).sum().backward()
        ht = ht * 0.5
    _close(w.grad, wt.grad)
    assert not w.grad.requires_grad
    with pytest.raises(UnsupportedError, match="backward\\(\\) inside a scan/cond/while body under jit"):
        aotjax.jit(lambda: aotjax.lax.scan(body, aotjax.ones(2), aotjax.tensor(xs)))()


@pytest.mark.parametrize("name", ["grad", "jacrev", "jacfwd", "vmap", "hessian"])
def test_eager_transforms_of_inputs_that_require_grad_are_recorded_as_torch_func(name):
    # torch.func composes with backward(): what grad(f)(x) computes from an x that requires grad is recorded
    def run(lib, func):
        x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        w = lib.tensor([1.5, 0.5, -2.0], requires_grad=True)
        f = (lambda v: (v.sin() * w * v).sum()) if name in ("grad", "hessian") else (lambda v: v.sin() * w * v)
        out = getattr(func, name)(f)(x)
        assert out.requires_grad
        (out * out).sum().backward()
        return out, x.grad, w.grad

    ours, theirs = run(aotjax, aotjax.func), run(torch, torch.func)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
