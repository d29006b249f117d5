"""Module hooks against torch's: forward pre-hooks and hooks (order, arguments, replaced inputs and outputs,
`prepend`, `with_kwargs`, `always_call`, global hooks), full backward hooks and pre-hooks (the gradients they see
and the ones they replace, with `backward()` and `autograd.grad`), the state-dict hooks; the same script runs on
both libraries and their logs are compared. Then what is aotjax's own: forward hooks under `jit` / `compile` (a
hook registered or removed after a trace traces again), backward hooks under a trace (an error), the pytree of a
module whose hooks were removed (its treedef is a fresh module's)."""
import warnings

import jax
import numpy as np
import pytest

import aotjax
from aotjax import nn
from aotjax.core.errors import UnsupportedError

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.x32_only  # NOTE: the hooks' order and arguments do not depend on the float width

LIBS = {"aotjax": aotjax, "torch": torch}


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def numpy(t):
    return None if t is None else np.asarray(t.detach().numpy() if hasattr(t, "detach") else t)


def same_weights(lib, module, seed=1):
    """Set every parameter of `module` (aotjax's or torch's) to the same random values."""
    with lib.no_grad():
        for k, (_, p) in enumerate(module.named_parameters()):
            p.copy_(lib.tensor(rand(*p.shape, seed=seed + k)))
    return module


def assert_logs_match(ours: list, theirs: list):
    assert len(ours) == len(theirs), (ours, theirs)
    for a, b in zip(ours, theirs):
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        elif isinstance(a, (tuple, list)):
            assert_logs_match(list(a), list(b))
        else:
            assert a == b, (ours, theirs)


def grads_log(grads) -> tuple:
    return tuple(numpy(g) for g in grads)


# -- forward hooks ---------------------------------------------------------------------------------------------------
def forward_scenario(lib):
    log = []
    fc = same_weights(lib, lib.nn.Linear(3, 2))
    x = lib.tensor(rand(2, 3))
    handles = [
        fc.register_forward_pre_hook(lambda m, args: log.append(("pre", len(args)))),
        fc.register_forward_pre_hook(lambda m, args: (args[0] * 2,)),  # a tuple replaces the arguments
        fc.register_forward_pre_hook(lambda m, args: log.append(("first", type(m).__name__)), prepend=True),
        fc.register_forward_pre_hook(lambda m, args, kwargs: log.append(("kw", sorted(kwargs))), with_kwargs=True),
        fc.register_forward_hook(lambda m, args, out: log.append(("post", numpy(args[0]), numpy(out)))),
        fc.register_forward_hook(lambda m, args, out: out + 1),
        fc.register_forward_hook(lambda m, args, kwargs, out: log.append(("post_kw", numpy(out))),
                                 with_kwargs=True),
    ]
    log.append(("out", numpy(fc(x))))
    log.append(("counts", len(fc._forward_pre_hooks), len(fc._forward_hooks), len(fc._forward_hooks_with_kwargs),
                len(fc._forward_pre_hooks_with_kwargs)))
    handles[1].remove()
    handles[5].remove()
    handles[5].remove()  # NOTE: a second remove does nothing
    log.append(("out", numpy(fc(x))))
    for h in handles:
        h.remove()
    log.append(("counts", len(fc._forward_pre_hooks), len(fc._forward_hooks), len(fc._forward_hooks_with_kwargs)))
    with fc.register_forward_hook(lambda m, args, out: out * 0):  # a handle is a context manager
        log.append(("with", numpy(fc(x))))
    log.append(("after", numpy(fc(x))))
    return log


def test_forward_hooks_order_arguments_and_replacements_match_torch():
    assert_logs_match(forward_scenario(aotjax), forward_scenario(torch))


def pre_hook_kwargs_scenario(lib):
    class Scale(lib.nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale

    m = Scale()
    m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] + 1,), {"scale": 3.0}), with_kwargs=True)
    m.register_forward_pre_hook(lambda mod, args: args[0] * 2)  # a single value is wrapped in a tuple
    out = m(lib.tensor([1.0, 2.0]), scale=10.0)
    bad = Scale()
    bad.register_forward_pre_hook(lambda mod, args, kwargs: 5, with_kwargs=True)
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple of"):
        bad(lib.tensor([1.0]))
    return [numpy(out)]


def test_forward_pre_hook_with_kwargs_replaces_args_and_kwargs_as_torch():
    assert_logs_match(pre_hook_kwargs_scenario(aotjax), pre_hook_kwargs_scenario(torch))


def always_call_scenario(lib):
    log = []

    class Boom(lib.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    m = Boom()
    m.register_forward_hook(lambda mod, args, out: log.append(("plain", out)))
    m.register_forward_hook(lambda mod, args, out: log.append(("always", out)), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        m(lib.ones(1))
    return log


def test_always_call_forward_hook_runs_when_forward_raises_as_torch():
    assert always_call_scenario(aotjax) == always_call_scenario(torch) == [("always", None)]


def global_scenario(lib):
    log = []
    mm = lib.nn.modules.module
    net = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU())
    net[0].register_forward_hook(lambda m, a, o: log.append(("own", type(m).__name__)))
    handles = [mm.register_module_forward_pre_hook(lambda m, a: log.append(("gpre", type(m).__name__))),
               mm.register_module_forward_hook(lambda m, a, o: log.append(("gpost", type(m).__name__)))]
    try:
        net(lib.ones(1, 2))
    finally:
        for h in handles:
            h.remove()
    net(lib.ones(1, 2))
    return log


def test_global_module_hooks_run_before_each_modules_own_as_torch():
    assert global_scenario(aotjax) == global_scenario(torch)


# -- backward hooks --------------------------------------------------------------------------------------------------
def backward_scenario(lib, how):
    log = []
    net = same_weights(lib, lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2)))
    x = lib.tensor(rand(5, 3)).requires_grad_()
    for i, m in enumerate(net):
        m.register_full_backward_pre_hook(lambda m, go, i=i: log.append(("pre", i, grads_log(go))))
        m.register_full_backward_hook(lambda m, gi, go, i=i: log.append(("full", i, grads_log(gi), grads_log(go))))
    net[1].register_full_backward_hook(lambda m, gi, go: (gi[0] * 3,))  # a replaced grad_input flows on
    net[2].register_full_backward_pre_hook(lambda m, go: (go[0] * -1,))  # and a replaced grad_output
    loss = (net(x) ** 2).sum()
    if how == "backward":
        loss.backward()
        log.append(("x.grad", numpy(x.grad)))
        log += [(n, numpy(p.grad)) for n, p in net.named_parameters()]
    else:
        params = [x] + list(net.parameters())
        log += [("grad", numpy(g)) for g in lib.autograd.grad(loss, params)]
    return log


@pytest.mark.parametrize("how", ["backward", "autograd.grad"])
def test_full_backward_hooks_see_and_replace_gradients_as_torch(how):
    assert_logs_match(backward_scenario(aotjax, how), backward_scenario(torch, how))


def multi_io_scenario(lib):
    log = []

    class Pair(lib.nn.Module):
        def forward(self, a, b, k, c):
            return a * b * k, (a + c).sum(-1), a > 0  # an unused output, a boolean one

    m = Pair()
    m.register_full_backward_pre_hook(lambda mod, go: log.append(("pre", grads_log(go))))
    m.register_full_backward_hook(lambda mod, gi, go: log.append(("full", grads_log(gi), grads_log(go))))
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[1], None, gi[3] * 0 if gi[3] is not None else None))
    a = lib.tensor(rand(2, 3)).requires_grad_()
    b = lib.tensor(rand(2, 3, seed=2)).requires_grad_()
    c = lib.tensor(rand(2, 3, seed=3))  # does not require grad
    prod, _, idx = m(a, b, 2.0, c)
    log.append(("idx", numpy(idx)))
    (prod.sin()).sum().backward()
    log += [("a", numpy(a.grad)), ("b", numpy(b.grad))]
    return log


def test_backward_hooks_of_several_inputs_and_outputs_as_torch():
    assert_logs_match(multi_io_scenario(aotjax), multi_io_scenario(torch))


def no_input_grad_scenario(lib):
    log = []
    fc = same_weights(lib, lib.nn.Linear(2, 2))
    fc.register_full_backward_hook(lambda m, gi, go: log.append((grads_log(gi), grads_log(go))))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fc(lib.tensor(rand(1, 2))).sum().backward()
    log.append(any("no inputs require gradients" in str(w.message) for w in caught))
    log.append(numpy(fc.weight.grad))
    return log


def test_full_backward_hook_fires_at_outputs_when_no_input_requires_grad_as_torch():
    assert_logs_match(no_input_grad_scenario(aotjax), no_input_grad_scenario(torch))


def test_backward_hook_outlives_the_modules_output_and_runs_at_each_backward():
    fc = nn.Linear(2, 1)
    seen = []
    fc.register_full_backward_hook(lambda m, gi, go: seen.append(go[0].shape))
    x = aotjax.ones(3, 2, requires_grad=True)
    loss = fc(x).sum()  # NOTE: the output tensor is gone before the backward
    loss.backward(retain_graph=True)
    loss.backward()
    assert seen == [(3, 1), (3, 1)]
    with aotjax.no_grad():
        fc(x)  # no graph: nothing set up


def test_backward_hook_returning_a_wrong_number_of_gradients_raises_as_torch():
    for lib in (aotjax, torch):
        fc = lib.nn.Linear(2, 1)
        fc.register_full_backward_hook(lambda m, gi, go: (None, None))
        with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
            fc(lib.ones(1, 2, requires_grad=True)).sum().backward()


# -- state dict hooks ------------------------------------------------------------------------------------------------
def state_dict_scenario(lib):
    log = []
    net = lib.nn.Sequential(lib.nn.Linear(1, 1))
    net[0].register_state_dict_pre_hook(lambda m, prefix, keep_vars: log.append(("pre", prefix, keep_vars)))
    net[0].register_state_dict_post_hook(lambda m, sd, prefix, meta: log.append(("post", prefix, list(sd))))
    net._register_state_dict_hook(lambda m, sd, prefix, meta: {k.upper(): v for k, v in sd.items()})
    log.append(list(net.state_dict()))

    def rename(module, sd, prefix, meta, strict, missing, unexpected, errors):
        if prefix + "w" in sd:
            sd[prefix + "weight"] = sd.pop(prefix + "w")

    target = lib.nn.Sequential(lib.nn.Linear(1, 1))
    target[0].register_load_state_dict_pre_hook(rename)
    target.register_load_state_dict_post_hook(lambda m, keys: log.append(("loaded", list(keys.missing_keys),
                                                                           list(keys.unexpected_keys))))
    target[0].register_load_state_dict_post_hook(lambda m, keys: keys.missing_keys.clear())
    result = target.load_state_dict({"0.w": lib.tensor([[2.0]])})
    log += [repr(result), numpy(target[0].weight)]
    return log


def test_state_dict_hooks_as_torch():
    assert_logs_match(state_dict_scenario(aotjax), state_dict_scenario(torch))


# -- under transforms ------------------------------------------------------------------------------------------------
def test_forward_hook_added_or_removed_after_a_trace_traces_again():
    net = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    x = aotjax.tensor(rand(1, 3))
    expected = net(x).detach().numpy()
    captured = aotjax.jit(lambda x: net(x))
    as_argument = aotjax.jit(lambda m, x: m(x))
    compiled = aotjax.compile(net)
    runs = [lambda: captured(x), lambda: as_argument(net, x), lambda: compiled(x)]
    for run in runs:
        np.testing.assert_allclose(run().detach().numpy(), expected, rtol=1e-6)
    handle = net[0].register_forward_hook(lambda m, args, out: out * 0 - 1)
    for run in runs:
        np.testing.assert_allclose(run().detach().numpy(), 0.0)
    handle.remove()
    for run in runs:
        np.testing.assert_allclose(run().detach().numpy(), expected, rtol=1e-6)


def test_backward_hooks_under_a_trace_with_grad_enabled_raise():
    fc = nn.Linear(2, 1)
    fc.register_full_backward_hook(lambda m, gi, go: None)
    x = aotjax.ones(1, 2)
    with pytest.raises(UnsupportedError, match=r"Linear: backward hooks \(.*<lambda>\) run in an eager backward"):
        aotjax.jit(lambda x: fc(x).sum())(x)
    with aotjax.no_grad():
        aotjax.jit(lambda x: fc(x).sum())(x)  # nothing to hook


def test_module_whose_hooks_were_removed_has_a_fresh_modules_treedef():
    fc = nn.Linear(2, 2)
    fresh = jax.tree_util.tree_structure(fc)
    fc.register_forward_hook(lambda m, a, o: None).remove()
    fc.register_full_backward_hook(lambda m, gi, go: None).remove()
    assert jax.tree_util.tree_structure(fc) == fresh
    fc.register_forward_hook(lambda m, a, o: None)
    assert jax.tree_util.tree_structure(fc) != fresh


def test_register_backward_hook_points_to_the_full_one():
    with pytest.raises(UnsupportedError, match="use register_full_backward_hook"):
        nn.Linear(1, 1).register_backward_hook(lambda m, gi, go: None)
