"""`aotjax.autograd.functional` against `torch.autograd.functional`, the semantics it copies.

A table of functions (elementwise, matmul, reductions, tuples of inputs and of outputs), each written once with the
Tensor methods and operators aotjax and PyTorch share, run by both libraries on the same float32 data: `vjp`, `jvp`
and `jacobian` (every strategy) on all of them, `hessian`, `vhp` and `hvp` on the scalar ones. Results must agree in
nesting (Tensor or tuples), shapes and values. Then the argument errors and `strict=True`: both libraries raise the
same exception type with the same message, ours prefixed by the function and the user's function's name.
"""
from __future__ import annotations

import re
import zlib
from typing import Callable, NamedTuple

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import aotjax
from aotjax.autograd import functional as AF

# NOTE: PyTorch's own functional API warns about its internal use of torch.jit.script (torch 2.13)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")

RTOL = ATOL = 1e-5


class Case(NamedTuple):
    name: str
    fn: Callable  # written with what aotjax and PyTorch share
    shapes: tuple  # the inputs': one shape (a Tensor is passed) or a tuple of shapes (a tuple is passed)

    def __repr__(self):
        return self.name


CASES = [
    Case("elementwise", lambda x: x.sin() * x, (3,)),
    Case("0-d input", lambda x: x.exp() * 2, ()),
    Case("reduction", lambda x: x.exp().sum(1), (2, 3)),
    Case("matmul", lambda a, b: a @ b, ((2, 3), (3, 2))),
    Case("tuple of one input", lambda x: x.tanh(), ((3,),)),
    Case("tuple of outputs", lambda x, y: (x * y, (x ** 2).sum()), ((3,), (3,))),
    Case("tuple of one output", lambda x: (x.cos(),), (2, 2)),
    Case("output independent of an input", lambda x, y: (x * 2, (y ** 2).mean()), ((2,), (3,))),
]
SCALAR_CASES = [  # one output of one element, for hessian, vhp and hvp
    Case("cubic", lambda x: (x ** 3).sum(), (3,)),
    Case("single element of shape (1,)", lambda x: (x.sin() * x).sum().reshape(1), (2, 2)),
    Case("two inputs", lambda x, y: (x.sin() * y).sum() + (y ** 2).mean(), ((2, 2), (2, 2))),
    Case("separable", lambda x, y: (x ** 2).sum() + y.exp().sum(), ((2,), (3,))),
]


def _single(shapes: tuple) -> bool:
    return all(isinstance(d, int) for d in shapes)


def _data(name: str, shapes: tuple, salt: str = ""):
    """float32 arrays for `shapes`: one array, or a tuple (as `shapes`), the same for a given case."""
    rng = np.random.default_rng(zlib.crc32((name + salt).encode()))
    make = lambda s: rng.uniform(-1.5, 1.5, s).astype(np.float32)
    return make(shapes) if _single(shapes) else tuple(make(s) for s in shapes)


def _to(lib, data):
    """`data` (an array or a tuple of them) as tensors of `lib` (aotjax or torch)."""
    if isinstance(data, tuple):
        return tuple(_to(lib, d) for d in data)
    return torch.from_numpy(np.array(data)) if lib is torch else aotjax.tensor(data)


def _like_outputs(case: Case, salt: str):
    """Random data shaped as `case`'s outputs (a cotangent for vjp)."""
    args = _to(torch, _data(case.name, case.shapes))
    out = case.fn(*args) if isinstance(args, tuple) else case.fn(args)
    shapes = tuple(o.shape for o in out) if isinstance(out, tuple) else tuple(out.shape)
    return _data(case.name, shapes, salt)


def assert_like_torch(ours, theirs, how=""):
    """Same nesting (a Tensor or tuples), shapes and values (to float32's tolerance). NOTE: PyTorch's forward-mode
    jacobian gives lists where its reverse mode gives tuples; ours gives tuples for both."""
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, tuple) and len(ours) == len(theirs), f"{how}: {type(ours)} vs a {len(theirs)}-tuple"
        for k, (o, t) in enumerate(zip(ours, theirs)):
            assert_like_torch(o, t, f"{how}[{k}]")
        return
    assert isinstance(ours, aotjax.Tensor), f"{how}: got {type(ours).__name__}, torch gives a Tensor"
    assert tuple(ours.shape) == tuple(theirs.shape), f"{how}: shape {tuple(ours.shape)}, torch {tuple(theirs.shape)}"
    np.testing.assert_allclose(np.asarray(ours), theirs.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=how)


def _both(api: str, case: Case, v=None, **kwargs):
    """`api` (a function name of the module) on `case` by both libraries: `(ours, torch's)`."""
    data = _data(case.name, case.shapes)
    with_v = {} if v is None else {"v": _to(aotjax, v)}
    ours = getattr(AF, api)(case.fn, _to(aotjax, data), **with_v, **kwargs)
    with_v = {} if v is None else {"v": _to(torch, v)}
    return ours, getattr(TF, api)(case.fn, _to(torch, data), **with_v, **kwargs)


# -- values --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_vjp(case):
    assert_like_torch(*_both("vjp", case, _like_outputs(case, "v")), "vjp")


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_jvp(case):
    assert_like_torch(*_both("jvp", case, _data(case.name, case.shapes, "v")), "jvp")


STRATEGIES = [dict(), dict(vectorize=True), dict(vectorize=True, strategy="forward-mode")]


@pytest.mark.parametrize("kwargs", STRATEGIES, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()) or "default")
@pytest.mark.parametrize("case", CASES + SCALAR_CASES, ids=repr)
def test_jacobian(case, kwargs):
    assert_like_torch(*_both("jacobian", case, **kwargs), "jacobian")


@pytest.mark.parametrize("kwargs", [dict(), dict(vectorize=True, outer_jacobian_strategy="forward-mode")],
                         ids=["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("case", SCALAR_CASES, ids=repr)
def test_hessian(case, kwargs):
    assert_like_torch(*_both("hessian", case, **kwargs), "hessian")


@pytest.mark.parametrize("api", ["vhp", "hvp"])
@pytest.mark.parametrize("case", SCALAR_CASES, ids=repr)
def test_vhp_hvp(case, api):
    assert_like_torch(*_both(api, case, _data(case.name, case.shapes, "v")), api)


@pytest.mark.parametrize("api, case", [
    ("vjp", Case("one output element", lambda x: (x ** 2).sum().reshape(1), (3,))),
    ("jvp", Case("one input element", lambda x: x * x.exp(), (1,))),
    ("vhp", Case("0-d input", lambda x: x.sin() * x, ())),
    ("hvp", Case("0-d input", lambda x: x.sin() * x, ())),
], ids=lambda x: x if isinstance(x, str) else x.name)
def test_v_may_be_none_for_one_element(api, case):
    assert_like_torch(*_both(api, case), api)


@pytest.mark.parametrize("api", ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"])
def test_create_graph_and_strict_change_no_value(api):
    case = SCALAR_CASES[2]  # every output depends on every input: strict passes
    v = {"vjp": _like_outputs(case, "v"), "jacobian": None, "hessian": None}.get(api,
                                                                                  _data(case.name, case.shapes, "v"))
    assert_like_torch(*_both(api, case, v, create_graph=True, strict=True), api)


def test_composes_with_transforms():
    """No tape: `create_graph` is moot, a transform differentiates through the result as PyTorch's graph does."""
    f, x, v = CASES[0].fn, _data("compose", (3,)), _data("compose", (3,), "v")
    ours = aotjax.grad(lambda x: AF.vjp(f, x, aotjax.tensor(v))[1].sum())(aotjax.tensor(x))
    tx = torch.tensor(x, requires_grad=True)
    (theirs,) = torch.autograd.grad(TF.vjp(f, tx, torch.tensor(v), create_graph=True)[1].sum(), tx)
    assert_like_torch(ours, theirs, "grad of vjp")
    jitted = aotjax.jit(lambda x: AF.hessian(SCALAR_CASES[0].fn, x))(aotjax.tensor(x))
    assert_like_torch(jitted, TF.hessian(SCALAR_CASES[0].fn, torch.tensor(x)), "jit of hessian")


@pytest.mark.parametrize("api", ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"])
def test_inputs_that_require_grad(api):
    """As PyTorch without create_graph: the same values, results that do not require grad, nothing recorded."""
    case = SCALAR_CASES[0]
    v = None if api in ("jacobian", "hessian") else _like_outputs(case, "v") if api == "vjp" else _data(
        case.name, case.shapes, "v")
    x = aotjax.tensor(_data(case.name, case.shapes)).requires_grad_()
    ours = getattr(AF, api)(case.fn, x, *([] if v is None else [aotjax.tensor(v)]))
    theirs = getattr(TF, api)(case.fn, torch.tensor(_data(case.name, case.shapes), requires_grad=True),
                              *([] if v is None else [torch.tensor(v)]))
    assert_like_torch(ours, theirs, api)
    assert not any(r.requires_grad for r in (ours if isinstance(ours, tuple) else (ours,)))


def _flat_results(r) -> list:
    return [t for x in (r if isinstance(r, tuple) else (r,)) for t in _flat_results(x)] if isinstance(r, tuple) \
        else [r]


@pytest.mark.parametrize("api", ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"])
def test_create_graph_records_the_results_for_a_double_backward_as_torch(api):
    case = SCALAR_CASES[1]
    v = None if api in ("jacobian", "hessian") else _like_outputs(case, "v") if api == "vjp" else _data(
        case.name, case.shapes, "v")
    x = aotjax.tensor(_data(case.name, case.shapes)).requires_grad_()
    tx = torch.tensor(_data(case.name, case.shapes), requires_grad=True)
    ours = getattr(AF, api)(case.fn, x, *([] if v is None else [aotjax.tensor(v)]), create_graph=True)
    theirs = getattr(TF, api)(case.fn, tx, *([] if v is None else [torch.tensor(v)]), create_graph=True)
    assert_like_torch(ours, theirs, api)
    ours, theirs = _flat_results(ours), _flat_results(theirs)
    assert [o.requires_grad for o in ours] == [t.requires_grad for t in theirs]
    sum(((o * o).sum() for o, t in zip(ours, theirs) if t.requires_grad), aotjax.tensor(0.0)).backward()
    sum(((t * t).sum() for t in theirs if t.requires_grad), torch.tensor(0.0)).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-4, atol=1e-5)


# -- errors: the same type and message as PyTorch ------------------------------------------------------------------
def returns_float(x):
    return 1.0


def returns_list(x):
    return [x * 2]


def returns_int_in_tuple(x):
    return x * 2, 1


def double(x):
    return x * 2


def add(x, y):
    return x + y


def total(x):
    return (x ** 2).sum()


def two_totals(x):
    return x.sum(), (x ** 2).sum()


def first_only(x, y):
    return x * 2


def detached_second(x, y):
    return x * y, y.detach()


def with_argmax(x, y):
    return x * y, x.argmax()


def separable(x, y):
    return (x ** 2).sum() + (y ** 3).sum()


def linear_in_y(x, y):
    return (x ** 2).sum() + y.sum()


def squares_of_x(x, y):
    return (x ** 2).sum()


class ErrorCase(NamedTuple):
    api: str
    func: Callable
    args: Callable  # lib -> the keyword arguments after func
    error: type
    message: str  # PyTorch's message, or a regex both messages match (`re:...`)


ONE = lambda t: t.ones(2)
PAIR = lambda t: (t.ones(2), t.ones(2))
ERRORS = [
    ErrorCase("vjp", returns_float, lambda t: dict(inputs=ONE(t), v=ONE(t)), TypeError,
              "The outputs of the user-provided function given to vjp must be either a Tensor or a tuple of Tensors "
              "but the given outputs of the user-provided function has type <class 'float'>."),
    ErrorCase("jvp", returns_list, lambda t: dict(inputs=ONE(t), v=ONE(t)), TypeError,
              "but the given outputs of the user-provided function has type <class 'list'>."),
    ErrorCase("jacobian", returns_int_in_tuple, lambda t: dict(inputs=ONE(t)), TypeError,
              "The outputs of the user-provided function given to jacobian must be either a Tensor or a tuple of "
              "Tensors but the value at index 1 has type <class 'int'>."),
    ErrorCase("hessian", returns_float, lambda t: dict(inputs=ONE(t)), TypeError, "has type <class 'float'>."),
    ErrorCase("vhp", returns_float, lambda t: dict(inputs=ONE(t), v=ONE(t)), TypeError, "has type <class 'float'>."),
    ErrorCase("hvp", returns_list, lambda t: dict(inputs=ONE(t), v=ONE(t)), TypeError, "has type <class 'list'>."),
    ErrorCase("jacobian", double, lambda t: dict(inputs=[ONE(t)]), TypeError,
              "The inputs given to jacobian must be either a Tensor or a tuple of Tensors but the given inputs has "
              "type <class 'list'>."),
    ErrorCase("vjp", add, lambda t: dict(inputs=(ONE(t), 3.0), v=ONE(t)), TypeError,
              "The inputs given to vjp must be either a Tensor or a tuple of Tensors but the value at index 1 has "
              "type <class 'float'>."),
    ErrorCase("vjp", double, lambda t: dict(inputs=ONE(t), v=[ONE(t)]), TypeError,
              "The v given to vjp must be either a Tensor or a tuple of Tensors but the given v has type "
              "<class 'list'>."),
    ErrorCase("vjp", double, lambda t: dict(inputs=ONE(t)), RuntimeError,
              "The vector v can only be None if the user-provided function returns a single Tensor with a single "
              "element."),
    ErrorCase("jvp", double, lambda t: dict(inputs=ONE(t)), RuntimeError,
              "The vector v can only be None if the input to the user-provided function is a single Tensor with a "
              "single element."),
    ErrorCase("vhp", total, lambda t: dict(inputs=ONE(t)), RuntimeError,
              "The vector v can only be None if the input to the user-provided function is a single Tensor with a "
              "single element."),
    ErrorCase("hvp", total, lambda t: dict(inputs=PAIR(t)), RuntimeError, "The vector v can only be None if"),
    ErrorCase("vjp", double, lambda t: dict(inputs=ONE(t), v=t.ones(3)), RuntimeError,
              r"re:v has invalid size: should be \D*2\D* but got \D*3\D*\."),
    ErrorCase("jvp", add, lambda t: dict(inputs=PAIR(t), v=(t.ones(2), t.ones(3))), RuntimeError,
              r"re:Entry 1 in v has invalid size: should be \D*2\D* but got \D*3\D*\."),
    ErrorCase("hvp", add, lambda t: dict(inputs=PAIR(t), v=(t.ones(2),)), RuntimeError,
              "v is a tuple of invalid length: should be 2 but got 1."),
    ErrorCase("vjp", double, lambda t: dict(inputs=ONE(t), v=PAIR(t)), RuntimeError,
              "The given v should contain a single Tensor."),
    ErrorCase("hessian", double, lambda t: dict(inputs=ONE(t)), RuntimeError,
              "The Tensor returned by the function given to hessian should contain a single element"),
    ErrorCase("vhp", two_totals, lambda t: dict(inputs=ONE(t), v=ONE(t)), RuntimeError,
              "The function given to vhp should return a single Tensor"),
    ErrorCase("hvp", double, lambda t: dict(inputs=ONE(t), v=ONE(t)), RuntimeError,
              "The Tensor returned by the function given to hvp should contain a single element"),
    ErrorCase("jacobian", double, lambda t: dict(inputs=ONE(t), strategy="forward-mode"), NotImplementedError,
              "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"),
    ErrorCase("hessian", total, lambda t: dict(inputs=ONE(t), outer_jacobian_strategy="forward-mode"),
              NotImplementedError, "only implemented for `vectorize=True`."),
    ErrorCase("jacobian", double, lambda t: dict(inputs=ONE(t), strategy="forward-mode", vectorize=True,
                                                 create_graph=True), NotImplementedError,
              '`create_graph=True` and `strategy="forward-mode"` are not supported together (yet).'),
    ErrorCase("jacobian", double, lambda t: dict(inputs=ONE(t), strategy="forward-mode", vectorize=True,
                                                 strict=True), RuntimeError,
              '`strict=True` and `strategy="forward-mode"` are not supported together (yet).'),
    ErrorCase("jacobian", double, lambda t: dict(inputs=ONE(t), vectorize=True, strict=True), RuntimeError,
              "`strict=True` and `vectorized=True` are not supported together."),
    # strict: an output independent of an input, as PyTorch's graph says
    ErrorCase("vjp", first_only, lambda t: dict(inputs=PAIR(t), v=ONE(t), strict=True), RuntimeError,
              "The output of the user-provided function is independent of input 1. This is not allowed in strict "
              "mode."),
    ErrorCase("jvp", detached_second, lambda t: dict(inputs=PAIR(t), v=PAIR(t), strict=True), RuntimeError,
              "Output 1 of the user-provided function does not require gradients. The outputs must be computed in a "
              "differentiable manner from the input when running in strict mode."),
    ErrorCase("vjp", with_argmax, lambda t: dict(inputs=PAIR(t), v=(t.ones(2), t.tensor(1)), strict=True),
              RuntimeError, "Output 1 of the user-provided function does not require gradients."),
    ErrorCase("jacobian", first_only, lambda t: dict(inputs=PAIR(t), strict=True), RuntimeError,
              "Output 0 of the user-provided function is independent of input 1. This is not allowed in strict mode."),
    ErrorCase("hessian", separable, lambda t: dict(inputs=PAIR(t), strict=True), RuntimeError,
              "Output 0 of the user-provided function is independent of input 1. This is not allowed in strict mode."),
    ErrorCase("hessian", linear_in_y, lambda t: dict(inputs=PAIR(t), strict=True), RuntimeError,
              "While computing the hessian, found that the jacobian of the user-provided function with respect to "
              "input 1 is independent of the input. This is not allowed in strict mode."),
    ErrorCase("hvp", linear_in_y, lambda t: dict(inputs=PAIR(t), v=PAIR(t), strict=True), RuntimeError,
              "the jacobian of the user-provided function with respect to input 1 is independent of the input."),
    ErrorCase("vhp", squares_of_x, lambda t: dict(inputs=PAIR(t), v=PAIR(t), strict=True), RuntimeError,
              "The output of the user-provided function is independent of input 1. This is not allowed in strict "
              "mode."),
]


@pytest.mark.parametrize("case", ERRORS, ids=lambda c: f"{c.api}-{c.func.__name__}-{c.message[:40]}")
def test_errors_as_torch(case):
    pattern = case.message[3:] if case.message.startswith("re:") else re.escape(case.message)
    with pytest.raises(case.error, match=pattern):
        getattr(TF, case.api)(case.func, **case.args(torch))
    with pytest.raises(case.error, match=pattern) as ours:
        getattr(AF, case.api)(case.func, **case.args(aotjax))
    assert str(ours.value).startswith(f"{case.api} of {case.func.__name__}: "), str(ours.value)


@pytest.mark.parametrize("api, strategy", [("jacobian", "strategy"), ("hessian", "outer_jacobian_strategy")])
def test_unknown_strategy(api, strategy):
    """PyTorch raises AssertionError; a wrong argument is a ValueError here."""
    expected = f'{api} of total: Expected strategy to be either "forward-mode" or "reverse-mode", got \'sideways\''
    with pytest.raises(ValueError, match=expected):
        getattr(AF, api)(total, aotjax.ones(2), **{strategy: "sideways"})
