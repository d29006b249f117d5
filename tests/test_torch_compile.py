"""`aotjax.compile` (torch.compile's API) and compiled functions called eagerly on tensors that require grad: one
node of the imperative autograd graph each, whose backward gives torch's gradients."""
import warnings

import numpy as np
import pytest
import torch

import aotjax


def _mlp(T):
    T.manual_seed(0)
    m = T.nn.Sequential(T.nn.Linear(3, 5), T.nn.Tanh(), T.nn.Linear(5, 2))
    with T.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(T.tensor(np.random.default_rng(i).standard_normal(tuple(p.shape)).astype(np.float32)))
    return m


def _steps(T, compile_model):
    m = _mlp(T)
    cm = compile_model(m)
    opt = T.optim.SGD(cm.parameters(), lr=0.1, momentum=0.9)
    x = T.tensor(np.random.default_rng(9).standard_normal((4, 3)).astype(np.float32))
    losses = []
    for _ in range(3):
        loss = cm(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, [p.detach().numpy() for p in m.parameters()], cm


def test_compiled_module_trains_as_torch_and_traces_once():
    ours, ours_params, cm = _steps(aotjax, aotjax.compile)
    theirs, theirs_params, _ = _steps(torch, lambda m: m)  # NOTE: torch eager: torch.compile needs a C compiler
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    for a, b in zip(ours_params, theirs_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert cm._compiled_call.trace_count == 1
    assert list(cm.state_dict())[0] == "_orig_mod.0.weight" and isinstance(cm._orig_mod, aotjax.nn.Sequential)


def test_the_compiled_call_is_one_node_whose_backward_is_the_aot_backward():
    m = _mlp(aotjax)
    cm = aotjax.compile(m)
    out = cm(aotjax.ones(2, 3))
    assert out.grad_fn.name() == "CompiledFunctionBackward"  # torch.compile's node
    assert {type(f).__name__ for f, _ in out.grad_fn.next_functions if f is not None} == {"AccumulateGrad"}


@pytest.mark.parametrize("wrap", [aotjax.jit, aotjax.aot, aotjax.compile], ids=["jit", "aot", "compile"])
def test_a_compiled_function_called_on_tensors_that_require_grad_is_differentiated(wrap):
    def f(x, w):
        return (x @ w).tanh().sum(0)

    x = aotjax.tensor([[1.0, 2.0], [0.5, -1.0]], requires_grad=True)
    w = aotjax.tensor([[0.3, -0.2], [0.1, 0.4]], requires_grad=True)
    y = wrap(f)(x, w)
    (y * aotjax.tensor([1.0, 3.0])).sum().backward()
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    tw = torch.tensor(w.detach().numpy(), requires_grad=True)
    ((tx @ tw).tanh().sum(0) * torch.tensor([1.0, 3.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5)


def test_a_jitted_training_step_that_updates_parameters_is_not_recorded():
    w = aotjax.tensor([1.0, 2.0], requires_grad=True)

    @aotjax.jit
    def step(w):
        loss, g = aotjax.value_and_grad(lambda v: (v * v).sum())(w)
        with aotjax.no_grad():
            w.sub_(0.1 * g)
        return loss

    loss = step(w)
    assert not loss.requires_grad and w.is_leaf and w.tolist() == pytest.approx([0.8, 1.6])


def test_compile_arguments_as_torch():
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        aotjax.compile(lambda x: x, mode="fastest")
    with pytest.raises(ValueError, match="unknown backend"):
        aotjax.compile(lambda x: x, backend="tvm-nope")
    f = aotjax.compile(mode="max-autotune", backend="inductor", dynamic=False)(lambda x: x * 2)
    assert f(aotjax.ones(2)).tolist() == [2.0, 2.0]
    assert aotjax.compile(lambda x: x, disable=True)(3) == 3
    closed = aotjax.make_jaxpr(lambda x: x + 1)(aotjax.ones(2))
    assert aotjax.compile(closed)(aotjax.ones(2)).tolist() == [2.0, 2.0]  # a jaxpr: aotjax.lowering.compile


def test_a_graph_break_runs_eagerly_unless_fullgraph():
    def f(x):
        if x.sum() > 0:  # NOTE: Python control flow on a value: torch.compile breaks the graph here
            return x * 2
        return x

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert aotjax.compile(f)(aotjax.ones(2)).tolist() == [2.0, 2.0]
    assert any("runs eagerly" in str(w.message) for w in seen)
    with pytest.raises(aotjax.core.errors.ConcretizationError):
        aotjax.compile(f, fullgraph=True)(aotjax.ones(2))


def test_torchscript_names_compile_or_return_what_they_mark():
    # NOTE: model code calls torch.jit.is_scripting() and decorates helpers; aotjax compiles script/trace with
    # aotjax.compile (an untraceable function still runs, eagerly)
    import torch

    for T in (torch, aotjax):
        assert T.jit.is_scripting() is False and T.jit.is_tracing() is False

    @aotjax.jit.script
    def scaled(x):
        return x * 2 + 1

    assert scaled(aotjax.ones(2)).tolist() == [3.0, 3.0] and scaled.trace_count == 1
    lin = aotjax.nn.Linear(2, 3)
    traced = aotjax.jit.trace(lin, aotjax.ones(1, 2))
    np.testing.assert_allclose(traced(aotjax.ones(4, 2)).numpy(), lin(aotjax.ones(4, 2)).detach().numpy(), rtol=1e-6)

    @aotjax.jit.ignore
    def helper(x):
        return x

    assert helper(5) == 5 and aotjax.jit.ignore(drop=True)(helper) is helper and aotjax.jit.unused(helper) is helper


def test_compiler_is_compiling_only_while_aotjax_traces():
    seen = []

    def f(x):
        seen.append(aotjax.compiler.is_compiling())
        return x + 1

    f(aotjax.zeros(1))
    aotjax.jit(f)(aotjax.zeros(1))
    aotjax.compile(f)(aotjax.zeros(2))
    aotjax.grad(lambda x: f(x).sum())(aotjax.zeros(1))  # NOTE: traced values too: a .item() there cannot run
    aotjax.vmap(f)(aotjax.zeros(3))
    f(aotjax.zeros(1))
    assert seen == [False, True, True, True, True, False]
    assert aotjax.compiler.disable(f) is f and aotjax.compiler.disable()(f) is f
