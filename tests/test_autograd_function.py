"""autograd.Function: a table of Functions, each defined once and subclassed from PyTorch's `torch.autograd.Function`
and from aotjax's; aotjax's outputs and gradients (under grad, vjp, jit and vmap, through the custom_vjp the Function
is) against PyTorch's `.backward()` on the same float32 data; then the errors, PyTorch's where it has them."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pytest

import aotjax
from aotjax.autograd.function import Function, FunctionCtx, once_differentiable
from aotjax.core.errors import AliasingError, ShapeError, UnsupportedError

torch = pytest.importorskip("torch")


# -- the Functions: one definition, two bases ----------------------------------------------------------------------
def _functions(Base) -> dict:
    """The table's Functions subclassed from `Base` (written with the Tensor methods PyTorch and aotjax share)."""

    class Exp(Base):  # saves its output
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class SignSTE(Base):  # a straight-through estimator: sign forward, the identity where |x| <= 1 backward
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sign()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (x.abs() <= 1)

    class MulAdd(Base):  # two inputs, two outputs
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y, x + y.sin()

        @staticmethod
        def backward(ctx, g_prod, g_sum):
            x, y = ctx.saved_tensors
            return g_prod * y + g_sum, g_prod * x + g_sum * y.cos()

    class Power(Base):  # non-tensor arguments, Python values on ctx
        @staticmethod
        def forward(ctx, x, k, mode, unused):
            ctx.k, ctx.mode, ctx.meta = k, mode, {"k": k, "dims": [0]}
            ctx.save_for_backward(x)
            return x.pow(k) if mode == "pow" else x * k

        @staticmethod
        def backward(ctx, g):
            assert type(ctx.k) is int and ctx.mode == "pow" and ctx.meta == {"k": ctx.k, "dims": [0]}
            assert tuple(ctx.needs_input_grad) == (True, False, False, False)
            (x,) = ctx.saved_tensors
            return g * ctx.k * x.pow(ctx.k - 1), None, None, None

    class MaxIndex(Base):  # an index output, marked non-differentiable: backward gets zeros for it
        @staticmethod
        def forward(ctx, x):
            values, index = x.max(dim=-1)
            ctx.mark_non_differentiable(index)
            ctx.save_for_backward(index)
            ctx.shape = tuple(x.shape)
            return values, index

        @staticmethod
        def backward(ctx, g_values, g_index):
            assert g_index is not None and tuple(g_index.shape) == tuple(g_values.shape)
            (index,) = ctx.saved_tensors
            return g_values.new_zeros(ctx.shape).scatter(-1, index.unsqueeze(-1), g_values.unsqueeze(-1))

    class HalfFrozen(Base):  # a float output marked non-differentiable, which the loss uses
        @staticmethod
        def forward(ctx, x):
            a, b = x * 2, x * 3
            ctx.mark_non_differentiable(b)
            return a, b

        @staticmethod
        def backward(ctx, g_a, g_b):
            return 2 * g_a + g_b

    class SetupContext(Base):  # PyTorch's newer style: forward takes no ctx
        @staticmethod
        def forward(x, y):
            return x * y.exp()

        @staticmethod
        def setup_context(ctx, inputs, output):
            _, y = inputs
            ctx.save_for_backward(y, output)

        @staticmethod
        def backward(ctx, g):
            y, out = ctx.saved_tensors
            return g * y.exp(), g * out

    class Unmaterialized(Base):  # set_materialize_grads(False): backward checks for None
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x)
            index = x.argmax()
            ctx.mark_non_differentiable(index)
            return x * 2, x * 3, index

        @staticmethod
        def backward(ctx, g1, g2, g_index):
            assert g_index is None
            (x,) = ctx.saved_tensors
            gx = x * 0
            if g1 is not None:
                gx = gx + 2 * g1
            if g2 is not None:  # None in PyTorch (the loss does not read output 1), zeros in aotjax
                gx = gx + 3 * g2
            return gx

    class CtxTensors(Base):  # tensors kept as ctx attributes rather than saved
        @staticmethod
        def forward(ctx, x, y):
            ctx.x, ctx.ys = x, (y, 2)
            return x * y * 2

        @staticmethod
        def backward(ctx, g):
            y, k = ctx.ys
            return g * y * k, g * ctx.x * k

    class DoubleInPlace(Base):  # writes its input in place, marked dirty
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    class BroadcastGrad(Base):  # backward gives x a gradient of the broadcast shape, and one None too many
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g, g, None

    class Views(Base):  # views as outputs, saved tensors and gradients
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x.t())
            return x.t(), (x * x).sum(0)

        @staticmethod
        def backward(ctx, g_t, g_sum):
            (xt,) = ctx.saved_tensors
            return (g_t + 2 * xt * g_sum.unsqueeze(-1)).t()

    class Gather(Base):  # an integer tensor input
        @staticmethod
        def forward(ctx, x, index):
            ctx.save_for_backward(index)
            ctx.n = x.shape[0]
            return x.index_select(0, index)

        @staticmethod
        def backward(ctx, g):
            assert tuple(ctx.needs_input_grad) == (True, False)
            (index,) = ctx.saved_tensors
            return g.new_zeros((ctx.n,) + tuple(g.shape[1:])).index_add(0, index, g), None

    return {c.__name__: c for c in (Exp, SignSTE, MulAdd, Power, MaxIndex, HalfFrozen, SetupContext, Unmaterialized,
                                    CtxTensors, DoubleInPlace, BroadcastGrad, Views, Gather)}


AOT = _functions(Function)
TORCH = _functions(torch.autograd.Function)


# -- the table -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class F:
    """A float32 tensor argument of this shape."""

    shape: tuple


@dataclass(frozen=True)
class Index:
    """An integer tensor argument holding these values."""

    values: tuple


@dataclass(frozen=True)
class Row:
    fn: str
    inputs: tuple  # per argument of apply: F, Index, or a static Python value
    use: tuple  # the outputs the loss reads

    def __repr__(self) -> str:
        return self.fn


ROWS = [
    Row("Exp", (F((3,)),), (0,)),
    Row("SignSTE", (F((2, 3)),), (0,)),
    Row("MulAdd", (F((3,)), F((3,))), (0, 1)),
    Row("Power", (F((3,)), 3, "pow", None), (0,)),
    Row("MaxIndex", (F((2, 3)),), (0,)),
    Row("HalfFrozen", (F((3,)),), (0, 1)),
    Row("SetupContext", (F((3,)), F((3,))), (0,)),
    Row("Unmaterialized", (F((3,)),), (0,)),
    Row("CtxTensors", (F((3,)), F((3,))), (0,)),
    Row("DoubleInPlace", (F((3,)),), (0,)),
    Row("BroadcastGrad", (F((3,)), F((2, 3))), (0,)),
    Row("Views", (F((2, 3)),), (0, 1)),
    Row("Gather", (F((4, 2)), Index((2, 0, 2))), (0,)),
]


def _floats(row: Row, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.5, 1.5, a.shape).astype(np.float32) for a in row.inputs if isinstance(a, F)]


def _weights(shape: tuple) -> np.ndarray:
    return (np.arange(int(np.prod(shape))) % 3 - 0.75).reshape(shape).astype(np.float32)


def _outputs(fns: dict, row: Row, floats) -> tuple:
    """`row`'s Function applied to `floats` (copies: the Function may write its input) and its other arguments."""
    lib = aotjax if fns is AOT else torch
    it = iter(floats)
    args = [next(it) * 1 if isinstance(a, F) else
            lib.tensor(np.array(a.values, np.int32 if lib is aotjax else np.int64)) if isinstance(a, Index) else a
            for a in row.inputs]
    out = fns[row.fn].apply(*args)
    return out if isinstance(out, tuple) else (out,)


def _loss(fns: dict, row: Row, *floats):
    lib = aotjax if fns is AOT else torch
    outs = _outputs(fns, row, floats)
    return sum((outs[j] * lib.tensor(_weights(tuple(outs[j].shape)))).sum() for j in row.use)


def _torch_grads(row: Row, arrays: list[np.ndarray]) -> list[np.ndarray]:
    leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    _loss(TORCH, row, *leaves).backward()
    return [np.zeros_like(a) if x.grad is None else x.grad.numpy() for a, x in zip(arrays, leaves)]


def _close(got, expected):
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-6)


# -- against PyTorch ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_forward_matches_torch(row: Row):
    arrays = _floats(row)
    got = _outputs(AOT, row, [aotjax.tensor(a) for a in arrays])
    expected = _outputs(TORCH, row, [torch.tensor(a) for a in arrays])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        _close(g, e.numpy())


def _grad(row, arrays):
    argnums = tuple(range(len(arrays)))
    return aotjax.grad(lambda *xs: _loss(AOT, row, *xs), argnums=argnums)(*map(aotjax.tensor, arrays))


def _vjp(row, arrays):
    out, f_vjp = aotjax.vjp(lambda *xs: tuple(_outputs(AOT, row, xs)[j] for j in row.use), *map(aotjax.tensor, arrays))
    return f_vjp(tuple(aotjax.tensor(_weights(tuple(o.shape))) for o in out))


def _jit_grad(row, arrays):
    argnums = tuple(range(len(arrays)))
    return aotjax.jit(aotjax.grad(lambda *xs: _loss(AOT, row, *xs), argnums=argnums))(*map(aotjax.tensor, arrays))


def _grad_jit(row, arrays):
    argnums = tuple(range(len(arrays)))
    return aotjax.grad(aotjax.jit(lambda *xs: _loss(AOT, row, *xs)), argnums=argnums)(*map(aotjax.tensor, arrays))


@pytest.mark.parametrize("how", [_grad, _vjp, _jit_grad, _grad_jit], ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_gradients_match_torch_backward(row: Row, how):
    arrays = _floats(row)
    got = how(row, arrays)
    for g, e in zip(got, _torch_grads(row, arrays), strict=True):
        _close(g, e)


VMAP_ROWS = [r for r in ROWS if r.fn in ("Exp", "MulAdd", "Power", "MaxIndex", "SetupContext", "CtxTensors",
                                        "DoubleInPlace", "Views", "Gather")]


@pytest.mark.parametrize("row", VMAP_ROWS, ids=repr)
def test_vmap_of_apply_and_of_its_gradient(row: Row):
    examples = [_floats(row, seed) for seed in range(3)]
    stacked = [aotjax.tensor(np.stack(xs)) for xs in zip(*examples)]
    outs = aotjax.vmap(lambda *xs: _outputs(AOT, row, xs))(*stacked)
    argnums = tuple(range(len(stacked)))
    grads = aotjax.vmap(aotjax.grad(lambda *xs: _loss(AOT, row, *xs), argnums=argnums))(*stacked)
    for k, arrays in enumerate(examples):
        expected = _outputs(TORCH, row, [torch.tensor(a) for a in arrays])
        for o, e in zip(outs, expected, strict=True):
            _close(o[k], e.numpy())
        for g, e in zip(grads, _torch_grads(row, arrays), strict=True):
            _close(g[k], e)


def test_grad_of_vmap_and_jit_of_apply():
    x = np.array([[0.1, -0.4], [1.2, 0.3]], np.float32)
    exp = AOT["Exp"]
    _close(aotjax.jit(exp.apply)(aotjax.tensor(x)), np.exp(x))
    _close(aotjax.grad(lambda x: aotjax.vmap(exp.apply)(x).sum())(aotjax.tensor(x)), np.exp(x))
    _close(aotjax.jacrev(exp.apply)(aotjax.tensor(x[0])), np.diag(np.exp(x[0])))


def test_second_derivative_differentiates_backward_like_torch():
    x = np.array([0.3, -0.7], np.float32)
    got = aotjax.grad(lambda x: aotjax.grad(lambda x: AOT["Exp"].apply(x).sum())(x).sum())(aotjax.tensor(x))
    xt = torch.tensor(x, requires_grad=True)
    (g,) = torch.autograd.grad(TORCH["Exp"].apply(xt).sum(), xt, create_graph=True)
    g.sum().backward()
    _close(got, xt.grad.numpy())


def test_in_place_forward_writes_the_input_eagerly_and_under_grad():
    x = aotjax.tensor([1.0, -2.0])
    out = AOT["DoubleInPlace"].apply(x)
    assert out is x
    _close(x, [2.0, -4.0])

    def f(x):
        z = x * 1
        out = AOT["DoubleInPlace"].apply(z)
        assert out is z
        return (z * z).sum()  # z is written: (2x)^2
    _close(aotjax.grad(f)(aotjax.tensor([1.0, -2.0])), [8.0, -16.0])
    assert "clone" not in str(aotjax.make_jaxpr(lambda x: AOT["Exp"].apply(x))(x))  # only writers run on clones


# -- the structure: one custom_vjp per Function and static structure -------------------------------------------
def test_apply_is_one_custom_vjp_call_made_once_per_structure():
    class Scale(Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    x = aotjax.tensor([1.0, 2.0])
    text = str(aotjax.make_jaxpr(lambda x: Scale.apply(x, 3.0))(x))
    assert text.count("custom_vjp_call[name=Scale fwd=Scale.forward") == 1
    for k in (2.0, 3.0):
        _close(aotjax.grad(lambda x, k=k: Scale.apply(x, k).sum())(x), [k, k])
    Scale.apply(x, x)
    assert len(Scale.__dict__["_aotjax_custom_vjps"]) == 2  # (tensor, static) and (tensor, tensor)

    class Sub(Scale):
        pass
    Sub.apply(x, 2.0)
    assert len(Sub.__dict__["_aotjax_custom_vjps"]) == 1


def test_keyword_arguments_defaults_vjp_alias_and_once_differentiable():
    class Affine(Function):
        @staticmethod
        def forward(x, a, b=1.0):
            return x * a + b

        @staticmethod
        def setup_context(ctx, inputs, output):
            assert len(inputs) == 3  # the default is bound, as in PyTorch
            ctx.a = inputs[1]

        @staticmethod
        def vjp(ctx, g):
            return g * ctx.a, None, None

    class Twice(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            return g * 2

    x = aotjax.tensor([1.0, 2.0])
    _close(Affine.apply(x, a=3.0), [4.0, 7.0])
    _close(aotjax.grad(lambda x: Affine.apply(x, 3.0, b=2.0).sum())(x), [3.0, 3.0])
    _close(aotjax.grad(lambda x: Twice.apply(x).sum())(x), [2.0, 2.0])


def test_forward_called_directly_with_a_ctx():
    ctx = FunctionCtx()
    y = AOT["Exp"].forward(ctx, aotjax.tensor([0.0]))
    _close(y, [1.0])
    with pytest.raises(RuntimeError, match="saved_tensors is read in backward"):
        _ = ctx.saved_tensors


def test_non_tensor_outputs_pass_through():
    class WithInfo(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, "doubled", 2

        @staticmethod
        def backward(ctx, g, g_info, g_factor):
            assert g_info is None and g_factor is None
            return g * 2

    x = aotjax.tensor([1.0, 3.0])
    y, info, factor = WithInfo.apply(x)
    assert (info, factor) == ("doubled", 2)
    _close(aotjax.grad(lambda x: WithInfo.apply(x)[0].sum())(x), [2.0, 2.0])


# -- errors --------------------------------------------------------------------------------------------------------
def _pair(forward, backward):
    """One Function from the same `forward` and `backward` for aotjax and for PyTorch."""
    body = {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    return type("Fn", (Function,), body), type("Fn", (torch.autograd.Function,), body)


def _both_raise(fns, arg: np.ndarray, aot_error, match: str, torch_error, torch_match: str):
    aot, tor = fns
    with pytest.raises(aot_error, match=match):
        aotjax.grad(lambda x: aot.apply(x, 2).sum())(aotjax.tensor(arg))
    x = torch.tensor(arg, requires_grad=True)
    with pytest.raises(torch_error, match=torch_match):
        tor.apply(x * 1, 2).sum().backward()


def test_backward_returning_the_wrong_number_of_gradients():
    fns = _pair(lambda ctx, x, k: x * k, lambda ctx, g: (g, g, g))
    _both_raise(fns, np.ones(2, np.float32), TypeError, r"Fn.backward returned 3 gradients, expected 2",
                RuntimeError, "incorrect number of gradients")


def test_backward_returning_a_gradient_for_a_non_tensor():
    fns = _pair(lambda ctx, x, k: x * k, lambda ctx, g: (g, g))
    _both_raise(fns, np.ones(2, np.float32), TypeError, "not None for input 1, which is not a tensor",
                RuntimeError, "different than None at position 2")


def test_backward_returning_a_gradient_of_the_wrong_shape_or_type():
    fns = _pair(lambda ctx, x, k: x * k, lambda ctx, g: (g[:1], None))
    _both_raise(fns, np.ones(2, np.float32), ShapeError, r"gradient of shape \[1\] for input 0, which has shape \[2\]",
                RuntimeError, "invalid gradient at index 0")
    fns = _pair(lambda ctx, x, k: x * k, lambda ctx, g: (1.0, None))
    _both_raise(fns, np.ones(2, np.float32), TypeError, "returned a float as the gradient of input 0",
                RuntimeError, "expected Variable or None")


def test_missing_forward_backward_and_both_backward_and_vjp():
    x = aotjax.tensor([1.0])

    class NoForward(Function):
        pass
    with pytest.raises(NotImplementedError, match="must implement the forward"):
        NoForward.apply(x)

    class NoBackward(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1
    _close(NoBackward.apply(x), [1.0])  # as in PyTorch, only differentiating needs backward
    with pytest.raises(NotImplementedError, match="must implement either the backward or vjp"):
        aotjax.grad(lambda x: NoBackward.apply(x).sum())(x)

    class Both(NoBackward):
        backward = vjp = staticmethod(lambda ctx, g: g)
    with pytest.raises(TypeError, match="defines both 'backward' and 'vjp'"):
        aotjax.grad(lambda x: Both.apply(x).sum())(x)


def test_instantiating_and_calling_a_function_object():
    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        fn = AOT["Exp"]()
    with pytest.raises(RuntimeError, match="legacy autograd function with non-static forward"):
        fn(aotjax.tensor([1.0]))


def _writes_unmarked(ctx, x):
    x.mul_(2)
    return x


@pytest.mark.parametrize("how", ["eager", "grad", "jit"])
def test_unmarked_in_place_write_of_an_input(how):
    fn = _pair(_writes_unmarked, lambda ctx, g: g)[0]
    x = aotjax.tensor([1.0, 2.0])
    run = {"eager": lambda: fn.apply(x * 1),
           "grad": lambda: aotjax.grad(lambda x: fn.apply(x * 1).sum())(x),
           "jit": lambda: aotjax.jit(lambda x: fn.apply(x * 1))(x)}[how]
    with pytest.raises(AliasingError, match=r"Fn.forward wrote into its input 0 in place .*ctx.mark_dirty"):
        run()


def test_dirty_tensor_not_returned():
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x * 1
    aot, tor = _pair(forward, lambda ctx, g: g)
    with pytest.raises(AliasingError, match="marked with ctx.mark_dirty is not an output"):
        aot.apply(aotjax.tensor([1.0]))
    with pytest.raises(RuntimeError, match="marked as dirty during the forward method were not returned"):
        tor.apply(torch.tensor([1.0]))


def test_misused_ctx_and_arguments():
    def saves_a_number(ctx, x):
        ctx.save_for_backward(3)
        return x
    aot, tor = _pair(saves_a_number, lambda ctx, g: g)
    with pytest.raises(TypeError, match="save_for_backward can only save tensors"):
        aot.apply(aotjax.tensor([1.0]))
    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        tor.apply(torch.tensor([1.0], requires_grad=True))

    fn = _pair(lambda ctx, x, xs: x * 1, lambda ctx, g: (g, None))[0]
    with pytest.raises(TypeError, match="Fn.apply: argument 1 is a list holding tensors"):
        fn.apply(aotjax.tensor([1.0]), [aotjax.tensor([2.0])])
    fn = _pair(lambda ctx, x: [x * 1], lambda ctx, g: g)[0]
    with pytest.raises(TypeError, match="Fn.forward returned a list holding tensors as output 0"):
        fn.apply(aotjax.tensor([1.0]))


def test_forward_mode_is_an_error():
    x = aotjax.tensor([1.0])
    with pytest.raises(UnsupportedError, match="custom_vjp function 'Exp': forward-mode differentiation"):
        aotjax.jvp(AOT["Exp"].apply, (x,), (x,))


def test_no_warnings_on_the_plain_path():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _close(aotjax.grad(lambda x: AOT["Exp"].apply(x).sum())(aotjax.tensor([0.0])), [1.0])
