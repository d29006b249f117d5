"""`grad`/`value_and_grad`/`vjp` of an `aot` function on eager arguments run its cached forward and backward
programs with no per-call tracing (`aotjax.transforms.aot_grad`).

Each test compares that path with the general one on the same compiled programs: `lambda *a: f(*a)` is not an
aot function, so differentiating it traces the call (linearize, transpose) as before. They must agree on values,
gradients, aux outputs, input writes and captured tensors; a call whose signature changed (shape, dtype, layout,
aliasing, captured tensor, static value) must find or trace the right programs. Whether the general path ran is
visible in the `aotjax` logger: it logs the pass `grad: linearize` (`vjp: linearize`), which the direct path has
no need of.
"""
from __future__ import annotations

import logging

import numpy as np
import pytest

import aotjax
from aotjax.core.errors import ShapeError
from tests.helpers import FLOAT, assert_trees_close, copy_tree

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass


def _t(*shape, scale=0.1, offset=0.0, dtype=FLOAT):
    n = int(np.prod(shape))
    return aotjax.tensor((np.arange(n, dtype=dtype).reshape(shape) + 1) * scale + offset)


def _close(a, b):
    assert_trees_close(a, b, rtol=1e-5, atol=1e-6)


class _Passes:
    """The passes the aotjax logger reports while in the `with` block (`caplog` at DEBUG)."""

    def __init__(self, caplog):
        self.caplog = caplog

    def __enter__(self):
        self.caplog.clear()
        self.caplog.set_level(logging.DEBUG, logger="aotjax")
        return self

    def __exit__(self, *exc):
        self.names = [r.getMessage().split(":\n")[0] for r in self.caplog.records if r.name == "aotjax"]
        self.caplog.set_level(logging.WARNING, logger="aotjax")

    @property
    def traced(self) -> bool:
        return any(n.startswith(("pass grad: linearize", "pass vjp: linearize")) for n in self.names)


def _general(f):
    """`f` behind a plain function: transforms of it take their general path (trace, linearize, transpose)."""
    return lambda *args, **kwargs: f(*args, **kwargs)


# -- one function with everything at the boundary, differentiated both ways ------------------------------------
_bias = _t(4, offset=-0.2)
_calls = aotjax.zeros(())


def _step(w, x, scale):
    _calls.add_(1)                    # a captured tensor, written
    w.mul_(0.5)                       # an input, written: the gradient is at its value on entry
    y = (w * x + _bias).tanh()        # a captured tensor, read
    return (y * y).sum() * scale, y   # a loss and an aux output


_compiled_step = aotjax.aot(_step)


def _run(transform, f, *args):
    """`transform(f)(*args)` on fresh copies of the tensors; returns the result, the copies after the call and
    the captured counter's value (restored after)."""
    args = copy_tree(args)
    before = np.asarray(_calls).copy()
    out = transform(f)(*args)
    after = np.asarray(_calls).copy()
    _calls.copy_(aotjax.tensor(before))
    return out, args, after


@pytest.mark.parametrize("argnums", [(0, 1), 1])
def test_value_and_grad_agrees_with_the_general_path(caplog, argnums):
    args = (_t(4), _t(4, offset=0.3), 1.5)

    def transform(f):
        return aotjax.value_and_grad(f, argnums=argnums, has_aux=True)

    want = _run(transform, _general(_compiled_step), *args)
    _run(transform, _compiled_step, *args)  # the first call may trace (the entry is made under the transform)
    with _Passes(caplog) as passes:
        got = _run(transform, _compiled_step, *args)
    assert not passes.traced, passes.names
    _close(got, want)  # loss, aux, gradients; the inputs after (w halved); the captured counter (+1)
    assert float(got[2]) == float(np.asarray(_calls)) + 1
    _close(got[1][0], args[0] * 0.5)


def test_grad_and_vjp_agree_with_the_general_path(caplog):
    x, w = _t(2, 3), _t(2, 3, offset=0.5)
    f = aotjax.aot(lambda x, w: ((x * w).sin().sum(), x * w))  # vjp: two outputs
    loss = aotjax.aot(lambda x, w: (x * w).sin().sum())
    ct = (aotjax.tensor(np.asarray(2.0, FLOAT)), _t(2, 3, scale=-0.3))
    for _ in range(2):  # the first call of each may trace
        grads = aotjax.grad(loss, argnums=(0, 1))(x, w)
        out, f_vjp = aotjax.vjp(f, x, w)
        cts = f_vjp(ct)
    with _Passes(caplog) as passes:
        grads = aotjax.grad(loss, argnums=(0, 1))(x, w)
        out, f_vjp = aotjax.vjp(f, x, w)
        cts, cts_again = f_vjp(ct), f_vjp(ct)
    assert not passes.traced, passes.names
    _close(grads, aotjax.grad(_general(loss), argnums=(0, 1))(x, w))
    out_ref, vjp_ref = aotjax.vjp(_general(f), x, w)
    _close(out, out_ref)
    _close(cts, vjp_ref(ct))
    _close(cts_again, cts)


def test_aliased_arguments_and_views(caplog):
    loss = aotjax.aot(lambda a, b: (a * b.exp()).sum())
    g = aotjax.grad(loss, argnums=(0, 1))
    base = _t(2, 3)
    for _ in range(2):
        g(base[0], base[1])
    with _Passes(caplog) as passes:
        got = g(base[0], base[1])   # two views of one storage: each reads the storage's gradient through its view
        same = g(base[1], base[1])  # one tensor passed twice: a new aliasing pattern, the general path first
    assert not passes.traced
    _close(got, aotjax.grad(_general(loss), argnums=(0, 1))(base[0], base[1]))
    _close(same, aotjax.grad(_general(loss), argnums=(0, 1))(base[1], base[1]))
    got[0].add_(1)  # the gradients are tensors of their own
    _close(base, _t(2, 3))


def test_a_changed_signature_finds_or_traces_the_right_programs(caplog):
    scale = _t(2, 3)

    def f(x, n):
        return (x * scale).sin().sum() * n

    compiled = aotjax.aot(f, static_argnums=1)
    g = aotjax.grad(compiled)

    def check(x, n, traces: int):
        before = compiled.trace_count
        for _ in range(2):
            got = g(x, n)
        with _Passes(caplog) as passes:
            got = g(x, n)
        assert not passes.traced
        _close(got, aotjax.grad(f)(x, n))
        assert compiled.trace_count == before + traces

    check(_t(2, 3), 2, traces=1)
    check(_t(2, 3), 3, traces=1)                   # a static value
    check(_t(3), 2, traces=1)                      # a shape
    check(_t(3, 2).t(), 2, traces=1)               # a layout (a transposed view)
    check(_t(2, 3, dtype=np.float16), 2, traces=1)  # a dtype
    x = _t(2, 3)
    check(x, 2, traces=0)                          # the first signature again: cached
    scale.mul_(2)                                  # the captured tensor's value: read at each call
    check(x, 2, traces=0)
    scale.t_()                                     # its layout and shape, changed in place
    check(_t(3, 2), 2, traces=1)


def test_what_the_direct_path_does_not_take_is_still_right():
    ident = aotjax.aot(lambda x: x)           # the loss is the input itself
    x = aotjax.tensor(np.asarray(3.0, FLOAT))
    for _ in range(2):
        assert float(aotjax.grad(ident)(x)) == 1.0
    vec = aotjax.aot(lambda x: x * 2)         # not a scalar: grad's error, every call
    for _ in range(2):
        with pytest.raises(ShapeError, match="must return a scalar"):
            aotjax.grad(vec)(_t(3))


def test_higher_order_and_jit_compose():
    f = aotjax.aot(lambda x: (x.sin() * x).sum())
    x = _t(3)
    gg = aotjax.grad(lambda x: aotjax.grad(f)(x).sum())  # grad(grad(aot f)): the inner grad sees tracers
    want = (2 * np.cos(np.asarray(x)) - np.asarray(x) * np.sin(np.asarray(x)))
    _close(gg(x), want)
    jg = aotjax.jit(aotjax.grad(f))
    for _ in range(2):
        _close(jg(x), np.sin(np.asarray(x)) + np.asarray(x) * np.cos(np.asarray(x)))


@pytest.mark.parametrize("change", ["t_", "unsqueeze_", "Module.to(dtype)", "under a transform"])
def test_the_same_argument_objects_changed_in_place_between_calls(change):
    """A repeated call passing the very same tensor objects skips the lookup; one whose arguments changed storage,
    layout, shape or dtype in place since (the same objects), or that runs under a transform, is still right."""
    lin = aotjax.nn.Linear(3, 2)
    w, x = lin.weight, _t(2, 3)
    loss = aotjax.aot(lambda w, x: (w * x.exp()).sin().sum())
    g = aotjax.grad(loss, argnums=(0, 1))
    for _ in range(3):
        g(w, x)
    if change == "t_":
        w.t_()
        x.t_()
    elif change == "unsqueeze_":
        x.unsqueeze_(0)
    elif change == "Module.to(dtype)":
        lin.half()
        x = x.half()
        g(w, x)
    if change == "under a transform":
        got = aotjax.jit(lambda w, x: g(w, x))(w, x)
    else:
        got = g(w, x)
    want = aotjax.grad(_general(loss), argnums=(0, 1))(w, x)
    assert [t.shape for t in got] == [t.shape for t in want]
    assert [t.dtype for t in got] == [t.dtype for t in want]
    _close(got, want)
