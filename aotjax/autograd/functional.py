"""`aotjax.autograd.functional`: PyTorch's `torch.autograd.functional` on aotjax's function transforms.

PyTorch runs its tape backwards (and backwards twice, "the double backward trick", for `jvp` and `hvp`); here each
function is one composition of the transforms, with PyTorch's signatures, argument checks and return conventions:

- `vjp` is `aotjax.vjp`, `jvp` is `aotjax.jvp` (true forward mode);
- `jacobian` is `aotjax.jacrev` (or `aotjax.jacfwd`) of `func` seen as a function of one vector, all the inputs
  flattened and concatenated, returning all the outputs flattened: one vmapped transform whatever the number of
  inputs and outputs, then cut into one block per (output, input);
- `hessian` is likewise `jacrev(jacrev(.))` (or `aotjax.hessian`, forward over reverse); `vhp` is the `vjp` of the
  gradient and `hvp` its `jvp`.

`inputs` (and `v`) are a Tensor or a tuple of Tensors; a Tensor in gives a Tensor out, a tuple a tuple (nested for
`jacobian` and `hessian`: `[output][input]`, `[input][input]`). Results are plain tensors.

- `create_graph=True` keeps inputs that require grad as they are: the eager transforms record what they compute
  from them (as `torch.func` composes with `backward()`), so the results require grad and `backward()` reaches the
  inputs (double backward). Without it, such inputs are detached first and the results require no grad. A transform
  of a function that calls these (say `aotjax.grad`) differentiates through them either way.
- `vectorize` changes nothing either: the Jacobians are always vmapped (PyTorch's forward mode still asks for
  `vectorize=True`, as PyTorch does).
- `strict=True` finds, as PyTorch's graph does, the outputs that do not depend on an input: structurally, on the
  linearized program (it traces `func` a second time).
"""
from __future__ import annotations

import math
from typing import Callable, NoReturn

from aotjax.core.ir import dce
from aotjax.core.source_info import where
from aotjax.ops import cat, ones_like, split
from aotjax.tensor import Tensor
from aotjax.transforms import autodiff  # NOTE: a module: this one defines vjp, jvp, hessian over its own
from aotjax.transforms.argnums import fun_name
from aotjax.transforms.make_jaxpr import make_jaxpr

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

_OUTPUTS = "outputs of the user-provided function"


def _as_tuple(x, arg_name: str, what: str, func: Callable) -> tuple[bool, tuple]:
    """`(whether x was a tuple, x as a tuple)`, every element checked to be a Tensor (PyTorch's `_as_tuple`)."""
    is_tuple, xs = isinstance(x, tuple), x if isinstance(x, tuple) else (x,)
    for i, el in enumerate(xs):
        if not isinstance(el, Tensor):
            at = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
            raise TypeError(f"{what} of {fun_name(func)}: The {arg_name} given to {what} must be either a Tensor or a "
                            f"tuple of Tensors but {at} has type {type(el)}.{where()}")
    return is_tuple, xs


def _inputs(inputs, what: str, func: Callable, create_graph: bool) -> tuple[bool, tuple]:
    """`_as_tuple` of `inputs`, then PyTorch's `_grad_preprocess`: without `create_graph`, a tensor that requires grad
    is detached, so the results do not require grad; with it, the inputs are kept and the transforms' eager work is
    recorded, so `backward()` reaches through the results (a traced input is kept either way)."""
    is_tuple, inputs = _as_tuple(inputs, "inputs", what, func)
    if create_graph:
        return is_tuple, inputs
    return is_tuple, tuple(t.detach() if getattr(t, "requires_grad", False) else t for t in inputs)


def _unpack(res: tuple, is_tuple: bool):
    return res if is_tuple else res[0]


def _checked(func: Callable, what: str, single: bool = False) -> Callable:
    """`func` with its outputs checked as PyTorch checks them (`single`: one Tensor of one element)."""
    def checked(*xs):
        out = func(*xs)
        is_tuple, _ = _as_tuple(out, _OUTPUTS, what, func)
        if single and is_tuple:
            raise RuntimeError(f"{what} of {fun_name(func)}: The function given to {what} should return a single "
                               f"Tensor{where()}")
        if single and out.numel() != 1:
            raise RuntimeError(f"{what} of {fun_name(func)}: The Tensor returned by the function given to {what} "
                               f"should contain a single element (got shape {list(out.shape)}){where()}")
        return out
    return checked


def _scalar_and_output(func: Callable, what: str) -> Callable:
    """`func`, checked to return one element: `(it as a 0-d tensor, func's output as it is)`."""
    checked = _checked(func, what, single=True)

    def scalar_and_output(*xs):
        out = checked(*xs)
        return out.reshape(()), out
    return scalar_and_output


def _v_for(v, refs: tuple, is_refs_tuple: bool, what: str, func: Callable, none_msg: str) -> tuple:
    """`v` as a tuple, checked against `refs` (the tensors it pairs with); None stands for ones when that is one."""
    if v is None:
        if len(refs) != 1 or refs[0].numel() != 1:
            raise RuntimeError(f"{what} of {fun_name(func)}: The vector v can only be None if {none_msg}{where()}")
        return (ones_like(refs[0]),)
    _, v = _as_tuple(v, "v", what, func)
    if len(v) != len(refs):
        msg = (f"v is a tuple of invalid length: should be {len(refs)} but got {len(v)}." if is_refs_tuple
               else "The given v should contain a single Tensor.")
        raise RuntimeError(f"{what} of {fun_name(func)}: {msg}{where()}")
    for i, (el_v, el_ref) in enumerate(zip(v, refs)):
        if el_v.shape != el_ref.shape:
            raise RuntimeError(f"{what} of {fun_name(func)}: {f'Entry {i} in ' if is_refs_tuple else ''}v has "
                               f"invalid size: should be {list(el_ref.shape)} but got {list(el_v.shape)}.{where()}")
    return v


# -- strict: which outputs depend on which inputs, read off the linearized program -------------------------------
def _dependence(func: Callable, inputs: tuple) -> list[list[bool]]:
    """`dep[i][j]`: output i of `func` depends on input j. NOTE: structural, as PyTorch's graph is: the tangent
    program's output i reads tangent input j (a `detach`ed value, an integer output or a constant has none)."""
    _, f_jvp = autodiff.linearize(func, *inputs)
    jaxpr = make_jaxpr(f_jvp)(*inputs).jaxpr
    used = [{id(v) for eqn in dce(jaxpr.eqns, [o]) for v in eqn.inputs} | {id(o)} for o in jaxpr.outvars]
    return [[id(x) in u for x in jaxpr.invars] for u in used]


_STRICT = " This is not allowed in strict mode."


def _fail(what: str, func: Callable, msg: str) -> NoReturn:
    raise RuntimeError(f"{what} of {fun_name(func)}: {msg}{where()}")


def _strict_outputs(dep: list, what: str, func: Callable) -> None:
    for i, row in enumerate(dep):
        if not any(row):
            _fail(what, func, f"Output {i} of the user-provided function does not require gradients. The outputs must "
                              f"be computed in a differentiable manner from the input when running in strict mode.")


def _strict_inputs(dep: list, what: str, func: Callable, msg: str) -> None:
    for j in range(len(dep[0])):
        if not any(row[j] for row in dep):
            _fail(what, func, msg.format(j))


def _strict_first(func: Callable, inputs: tuple, what: str) -> None:
    """PyTorch's strict checks of `vjp` and `jvp`: every output depends on an input, every input reaches an output."""
    dep = _dependence(func, inputs)
    _strict_outputs(dep, what, func)
    _strict_inputs(dep, what, func, "The output of the user-provided function is independent of input {}." + _STRICT)


def _strict_pairs(dep: list, what: str, func: Callable) -> None:
    for i, row in enumerate(dep):
        for j, d in enumerate(row):
            if not d:
                _fail(what, func, f"Output {i} of the user-provided function is independent of input {j}.{_STRICT}")


def _strict_second(func: Callable, inputs: tuple, what: str) -> list[list[bool]]:
    """PyTorch's strict checks of the gradient (for `vhp`, `hvp`, `hessian`); returns its dependence on the inputs:
    `[i][j]`, the gradient in input i depends on input j."""
    out_dep = _dependence(func, inputs)
    _strict_outputs(out_dep, what, func)
    grad_fn = autodiff.grad(lambda *xs: _scalar_and_output(func, what)(*xs)[0], argnums=tuple(range(len(inputs))))
    grad_dep = _dependence(grad_fn, inputs)
    for i, row in enumerate(grad_dep):
        if not out_dep[0][i] and what != "hessian":  # NOTE: PyTorch's hessian takes a zero gradient: no grad_fn
            _fail(what, func, f"The output of the user-provided function is independent of input {i}.{_STRICT}")
        if not any(row):
            _fail(what, func, f"While computing the hessian, found that the jacobian of the user-provided function "
                              f"with respect to input {i} is independent of the input.{_STRICT} You should ensure "
                              f"that your function is twice differentiable and that the jacobian depends on the "
                              f"inputs (this would be violated by a linear function for example).")
    return grad_dep


# -- the functions -------------------------------------------------------------------------------------------------
def vjp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """`(func(*inputs), v · J)`: the vector-Jacobian product, shaped as `inputs`.

    >>> aotjax.autograd.functional.vjp(lambda x: x ** 2, aotjax.tensor([1.0, 2.0]), aotjax.ones(2))
    (tensor([1., 4.]), tensor([2., 4.]))
    """
    is_inputs_tuple, inputs = _inputs(inputs, "vjp", func, create_graph)
    out, f_vjp = autodiff.vjp(_checked(func, "vjp"), *inputs)
    is_outputs_tuple, outputs = _as_tuple(out, _OUTPUTS, "vjp", func)
    v = _v_for(v, outputs, is_outputs_tuple, "vjp", func, "the user-provided function returns a single Tensor "
                                                           "with a single element.")
    if strict:
        _strict_first(func, inputs, "vjp")
    return out, _unpack(f_vjp(_unpack(v, is_outputs_tuple)), is_inputs_tuple)


def jvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """`(func(*inputs), J · v)`: the Jacobian-vector product, shaped as the output.

    >>> aotjax.autograd.functional.jvp(lambda x, y: x * y, (aotjax.tensor([1.0, 2.0]), aotjax.tensor([3.0, 4.0])),
    ...                                (aotjax.ones(2), aotjax.zeros(2)))
    (tensor([3., 8.]), tensor([3., 4.]))
    """
    is_inputs_tuple, inputs = _inputs(inputs, "jvp", func, create_graph)
    v = _v_for(v, inputs, is_inputs_tuple, "jvp", func, "the input to the user-provided function is a single "
                                                         "Tensor with a single element.")
    out, tangent_out = autodiff.jvp(_checked(func, "jvp"), inputs, v)
    if strict:
        _strict_first(func, inputs, "jvp")
    return out, tangent_out


def _check_strategy(strategy: str, create_graph: bool, strict: bool, vectorize: bool, what: str,
                    func: Callable) -> None:
    what = f"{what} of {fun_name(func)}"
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError(f"{what}: Expected strategy to be either \"forward-mode\" or \"reverse-mode\", got "
                         f"{strategy!r}. Hint: If your function has more outputs than inputs, \"forward-mode\" tends "
                         f"to be more performant. Otherwise, prefer to use \"reverse-mode\".{where()}")
    if strategy == "forward-mode" and create_graph:
        raise NotImplementedError(f"{what}: `create_graph=True` and `strategy=\"forward-mode\"` are not supported "
                                  f"together (yet). Please either set `create_graph=False` or "
                                  f"`strategy=\"reverse-mode\"`.{where()}")
    if strategy == "forward-mode" and strict:
        raise RuntimeError(f"{what}: `strict=True` and `strategy=\"forward-mode\"` are not supported together (yet). "
                           f"Please either set `strict=False` or `strategy=\"reverse-mode\"`.{where()}")
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError(f"{what}: Computing Jacobian using forward-AD or forward-over-reverse Hessian is "
                                  f"only implemented for `vectorize=True`.{where()}")
    if strict and vectorize:
        raise RuntimeError(f"{what}: `strict=True` and `vectorized=True` are not supported together. Please either "
                           f"set `strict=False` or `vectorize=False`.{where()}")


def _flat(func: Callable, inputs: tuple, seen: list) -> Callable:
    """`func` as a function of one vector (the inputs, flattened, concatenated) returning one vector (likewise, its
    outputs); each call appends to `seen` whether its outputs were a tuple, and their shapes."""
    def flat_func(x):
        parts = split(x, [t.numel() for t in inputs])
        out = func(*[p.reshape(t.shape) for p, t in zip(parts, inputs)])
        outs = out if isinstance(out, tuple) else (out,)
        seen.append((isinstance(out, tuple), [o.shape for o in outs]))
        return cat([o.reshape(-1) for o in outs])
    return flat_func


def _blocks(matrix: Tensor, row_shapes: list, col_shapes: list) -> tuple:
    """`matrix` cut into blocks, `[i][j]` of shape `row_shapes[i] + col_shapes[j]`."""
    rows = split(matrix, [math.prod(s) for s in row_shapes])
    return tuple(tuple(b.reshape(*rs, *cs) for b, cs in zip(split(r, [math.prod(s) for s in col_shapes], dim=1),
                                                             col_shapes)) for r, rs in zip(rows, row_shapes))


def jacobian(func: Callable, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode"):
    """The Jacobian of `func` at `inputs`: a Tensor of shape `out.shape + input.shape` for one input and one output,
    else tuples of them, `[output][input]`.

    >>> aotjax.autograd.functional.jacobian(lambda x, y: x * y, (aotjax.tensor([1.0, 2.0]), aotjax.tensor(3.0)))
    (tensor([[3., 0.],
            [0., 3.]]), tensor([1., 2.]))
    """
    _check_strategy(strategy, create_graph, strict, vectorize, "jacobian", func)
    is_inputs_tuple, inputs = _inputs(inputs, "jacobian", func, create_graph)
    seen: list = []  # what the flat function saw of func's outputs
    jac_of = autodiff.jacrev if strategy == "reverse-mode" else autodiff.jacfwd
    jac = jac_of(_flat(_checked(func, "jacobian"), inputs, seen))(cat([t.reshape(-1) for t in inputs]))
    if strict:
        dep = _dependence(func, inputs)
        _strict_outputs(dep, "jacobian", func)
        _strict_pairs(dep, "jacobian", func)
    is_outputs_tuple, shapes = seen[-1]
    res = _blocks(jac, shapes, [t.shape for t in inputs])
    return _unpack(tuple(_unpack(row, is_inputs_tuple) for row in res), is_outputs_tuple)


def hessian(func: Callable, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of scalar `func` at `inputs`: a Tensor of shape `input.shape * 2` for one input, else tuples of
    them, `[input][input]`.

    >>> aotjax.autograd.functional.hessian(lambda x: (x ** 3).sum(), aotjax.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    _check_strategy(outer_jacobian_strategy, create_graph, strict, vectorize, "hessian", func)
    is_inputs_tuple, inputs = _inputs(inputs, "hessian", func, create_graph)
    flat = _flat(_checked(func, "hessian", single=True), inputs, [])
    flat_scalar = lambda x: flat(x).reshape(())
    flat_hessian = (autodiff.jacrev(autodiff.jacrev(flat_scalar)) if outer_jacobian_strategy == "reverse-mode"
                    else autodiff.hessian(flat_scalar))
    h = flat_hessian(cat([t.reshape(-1) for t in inputs]))
    if strict:
        _strict_pairs(_strict_second(func, inputs, "hessian"), "hessian", func)
    shapes = [t.shape for t in inputs]
    return _unpack(tuple(_unpack(row, is_inputs_tuple) for row in _blocks(h, shapes, shapes)), is_inputs_tuple)


def _second_order(what: str, func: Callable, inputs, v, create_graph: bool, strict: bool):
    """`vhp` and `hvp`: the checked inputs and `v`, and the gradient of `func` with its output as aux."""
    is_inputs_tuple, inputs = _inputs(inputs, what, func, create_graph)
    v = _v_for(v, inputs, is_inputs_tuple, what, func, "the input to the user-provided function is a single Tensor "
                                                       "with a single element.")
    grad_and_out = autodiff.grad(_scalar_and_output(func, what), argnums=tuple(range(len(inputs))), has_aux=True)
    grad_dep = _strict_second(func, inputs, what) if strict else None
    return is_inputs_tuple, inputs, v, grad_and_out, grad_dep


def vhp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """`(func(*inputs), v · H)`, H the Hessian of scalar `func`: the vjp of its gradient.

    >>> aotjax.autograd.functional.vhp(lambda x: (x ** 3).sum(), aotjax.tensor([1.0, 2.0]), aotjax.ones(2))
    (tensor(9.), tensor([ 6., 12.]))
    """
    is_inputs_tuple, inputs, v, grad_and_out, grad_dep = _second_order("vhp", func, inputs, v, create_graph, strict)
    _, f_vjp, out = autodiff.vjp(grad_and_out, *inputs, has_aux=True)
    if strict:
        _strict_inputs(grad_dep, "vhp", func, "The jacobian of the user-provided function is independent of input {}."
                       + _STRICT)
    return out, _unpack(f_vjp(v), is_inputs_tuple)


def hvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """`(func(*inputs), H · v)`, H the Hessian of scalar `func`: the jvp of its gradient (forward over reverse).

    >>> aotjax.autograd.functional.hvp(lambda x: (x ** 3).sum(), aotjax.tensor([1.0, 2.0]), aotjax.ones(2))
    (tensor(9.), tensor([ 6., 12.]))
    """
    is_inputs_tuple, inputs, v, grad_and_out, _ = _second_order("hvp", func, inputs, v, create_graph, strict)
    _, hv, out = autodiff.jvp(grad_and_out, inputs, v, has_aux=True)
    return out, _unpack(hv, is_inputs_tuple)
