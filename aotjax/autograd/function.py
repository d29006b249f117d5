"""`Function`: PyTorch's custom autograd functions (`torch.autograd.Function`), made of `aotjax.custom_vjp`.

A subclass defines `forward(ctx, *args)` (or `forward(*args)` and `setup_context(ctx, inputs, output)`) and
`backward(ctx, *grad_outputs)`, as in PyTorch, and is called as `MyFn.apply(*args)`. There is no second
derivative mechanism: `apply` calls a `custom_vjp` made once per Function and per static structure of the call
(the number of arguments, which of them are tensors), so every transform sees one `custom_vjp_call` equation and
`grad`, `vjp`, `jit` and `vmap` treat it as they treat any custom_vjp function. The mapping:

- the tensor arguments of `apply` are the custom_vjp's arguments; the others (numbers, strings, None, ...) are its
  `nondiff_argnums`: static, passed to `forward` as they are; `backward` returns None for them;
- the custom_vjp's function and its `fwd` both run `forward`, each with a fresh `FunctionCtx`; the function's
  output is forward's output: its tensors are the values, the rest (a tuple or not, non-tensor outputs, the
  outputs marked non-differentiable or dirty) is the output's tree structure, static;
- `fwd`'s residuals are what `backward` reads from the ctx: the tensors given to `ctx.save_for_backward` and the
  tensors among the attributes set on ctx are the residual values; the rest (the other attributes,
  `needs_input_grad`, `set_materialize_grads`, the inputs' shapes) is the residuals' tree structure, static, so it
  reaches `backward` as the Python values it was (`ctx.k = 3` is the int 3 there);
- the custom_vjp's `bwd` rebuilds a ctx from the residuals, calls `backward(ctx, *grad_outputs)` and checks its
  result as PyTorch does: one gradient per input of `forward` (None for a zero; extra trailing Nones are
  dropped), a gradient of a shape its input broadcasts to summed back to the input's shape, cast to its dtype.

`forward` may write into an input only if it says so with `ctx.mark_dirty` and returns that input. Eagerly it
writes into the input itself; under a transform the custom_vjp's function must not write into its arguments, so
a Function whose `forward` writes runs on clones of its inputs there, and `apply` copies the results back.

Differences from PyTorch: forward mode (`jvp`, `jacfwd`) is an error, as for every custom_vjp function (a `jvp`
staticmethod is not used); `vmap` batches `forward` and `backward` themselves, as PyTorch's
`generate_vmap_rule=True` does (a `vmap` staticmethod is not used); with `set_materialize_grads(False)`,
`backward` gets None for the outputs marked non-differentiable, the integer outputs and the non-tensor outputs,
but a zero tensor for an unused output (the transpose gives the rule real zeros); `once_differentiable` returns
`backward` as it is (a second derivative differentiates it, where PyTorch raises); a write into an input that is
not marked dirty is an error (PyTorch may let it pass); misuse raises aotjax's errors (`TypeError`, `ShapeError`,
`AliasingError`) where PyTorch raises `RuntimeError`, with the same facts.

>>> class Exp(Function):
...     @staticmethod
...     def forward(ctx, x):
...         y = x.exp()
...         ctx.save_for_backward(y)
...         return y
...     @staticmethod
...     def backward(ctx, grad_y):
...         (y,) = ctx.saved_tensors
...         return grad_y * y
>>> x = aotjax.tensor([0.0, 1.0])
>>> Exp.apply(x)
tensor([1. ..., 2.718...])
>>> aotjax.grad(lambda x: Exp.apply(x).sum())(x)
tensor([1. ..., 2.718...])
>>> print(aotjax.make_jaxpr(lambda x: Exp.apply(x).sum())(x))
{ lambda ; a:f32[2]. let
    d:f32[2] = custom_vjp_call[name=Exp fwd=Exp.forward call=
          { lambda ; b:f32[2]. let
              c:f32[2] = exp b
            in (c,) }] a
    e:f32[] = reduce_sum[axes=(0,) keepdims=False] d
  in (e,) }
"""
from __future__ import annotations

import inspect
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import jax

from aotjax.core.errors import AliasingError, ShapeError
from aotjax.core.interpreter import Tracer
from aotjax.core.source_info import user_stacklevel, where
from aotjax.interpreters.ad_util import is_differentiable
from aotjax.ops.creation.factories import zeros_like
from aotjax.tensor import Tensor
from aotjax.transforms.custom_derivatives import custom_vjp

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


# -- the ctx ------------------------------------------------------------------------------------------------------
class FunctionCtx:
    """The `ctx` a Function's `forward` (or `setup_context`) and `backward` get (PyTorch's `FunctionCtx`).

    In forward: `save_for_backward(*tensors)`, `mark_dirty`, `mark_non_differentiable`, `set_materialize_grads`,
    and any attribute you set (`ctx.k = 3`), which `backward` reads back: Python values as they were, tensors as
    residuals. In both: `needs_input_grad`, one bool per input of forward (True for a floating or complex tensor).
    In backward: `saved_tensors`.

    >>> ctx = FunctionCtx()                     # what `apply` makes; by hand, to call a forward directly
    >>> ctx.save_for_backward(aotjax.tensor([1.0]), None)
    >>> ctx.k = 3
    """

    def __init__(self, name: str = "Function", needs_input_grad: tuple[bool, ...] = ()):
        self.needs_input_grad = needs_input_grad
        self._name = name
        self._to_save: tuple = ()
        self._saved: tuple | None = None  # set in backward only
        self._dirty: tuple = ()
        self._non_differentiable: tuple = ()
        self._materialize = True

    def save_for_backward(self, *tensors) -> None:
        """Keep `tensors` (or None) for `backward`, which reads them as `ctx.saved_tensors`. Call it once, in
        forward or setup_context; keep Python values as attributes instead (`ctx.k = 3`)."""
        for i, t in enumerate(tensors):
            if not (t is None or isinstance(t, Tensor)):
                raise TypeError(f"{self._name}: save_for_backward can only save tensors (or None), but argument "
                                f"{i} is a {type(t).__name__}{where()}; keep Python values as attributes of ctx "
                                f"(ctx.k = 3)")
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        """The tensors forward gave `save_for_backward`, in `backward` (None where None was saved)."""
        if self._saved is None:
            raise RuntimeError(f"{self._name}: ctx.saved_tensors is read in backward; forward saves tensors with "
                               f"ctx.save_for_backward(...){where()}")
        return self._saved

    def mark_dirty(self, *tensors) -> None:
        """Say that forward wrote `tensors` (inputs) in place; forward must return them. A write into an input
        that is not marked is an error."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        """Give outputs `tensors` (indices, masks, ...) no gradient: `backward` gets zeros for them (None with
        `set_materialize_grads(False)`), whatever flows into them."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """With False, `backward` gets None, not zeros, for the gradients of the outputs that have none (here:
        those marked non-differentiable, integer and non-tensor outputs)."""
        self._materialize = bool(value)


_OWN = frozenset(vars(FunctionCtx()))  # the ctx's own attributes; the user's are the others


# -- static values: hashable, so that they can be custom_vjp params ------------------------------------------------
class _Opaque:
    """A static value that cannot be hashed (a list, an array), compared by identity."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _static(v):
    try:
        hash(v)
    except TypeError:
        return _Opaque(v)
    return v


def _unbox(v):
    return v.value if isinstance(v, _Opaque) else v


class _TensorSlot:
    """Marks where a tensor is among static values."""

    def __repr__(self) -> str:
        return "<tensor>"


_TENSOR = _TensorSlot()


def _statics(values) -> tuple:
    """`values` as static data: _TENSOR in place of each tensor."""
    return tuple(_TENSOR if isinstance(v, Tensor) else _static(v) for v in values)


def _has_tensor(v) -> bool:
    return any(isinstance(x, Tensor) for x in jax.tree_util.tree_leaves(v))


# -- forward's output and what it leaves for backward, as pytrees: tensors the leaves, the rest the structure -------
@dataclass(frozen=True)
class _OutSpec:
    is_tuple: bool  # whether forward returned a tuple
    items: tuple  # each output: _TENSOR, or its static value
    dirty: tuple  # (input, output) pairs: forward wrote the input in place and returned it as that output
    non_differentiable: tuple  # the outputs marked non-differentiable


class _Tensors:
    """Tensors and the static `spec` of what they are, as a pytree whose leaves are the tensors."""

    def __init__(self, tensors: tuple, spec):
        self.tensors, self.spec = tensors, spec

    def tree_flatten(self):
        return self.tensors, self.spec

    @classmethod
    def tree_unflatten(cls, spec, tensors):
        return cls(tuple(tensors), spec)


@jax.tree_util.register_pytree_node_class
class _Out(_Tensors):
    """forward's output as the custom_vjp's output (and its cotangent, in backward)."""

    def items(self, static: Callable = _unbox) -> list:
        """One entry per output: the tensors in their places, `static(value)` elsewhere."""
        tensors = iter(self.tensors)
        return [next(tensors) if v is _TENSOR else static(v) for v in self.spec.items]


@dataclass(frozen=True)
class _SavedSpec:
    saved: Any  # the tree structure of ctx.save_for_backward's arguments
    attrs: Any  # the tree structure of the user's ctx attributes (a dict)
    attr_values: tuple  # their leaves: _TENSOR, or the static value
    needs_input_grad: tuple
    in_avals: tuple  # per input of forward: (shape, dtype), or None for a non-tensor
    materialize: bool


@jax.tree_util.register_pytree_node_class
class _Saved(_Tensors):
    """What backward reads from the ctx: the custom_vjp's residuals."""

    @classmethod
    def of(cls, ctx: FunctionCtx, args: tuple) -> "_Saved":
        saved, saved_tree = jax.tree_util.tree_flatten(ctx._to_save)
        attrs, attrs_tree = jax.tree_util.tree_flatten({k: v for k, v in vars(ctx).items() if k not in _OWN})
        spec = _SavedSpec(saved_tree, attrs_tree, _statics(attrs), ctx.needs_input_grad, _in_avals(args),
                          ctx._materialize)
        return cls(tuple(map(_leaving, (*saved, *(v for v in attrs if isinstance(v, Tensor))))), spec)

    def ctx(self, name: str) -> FunctionCtx:
        spec = self.spec
        ctx = FunctionCtx(name, spec.needs_input_grad)
        ctx._materialize = spec.materialize
        n = spec.saved.num_leaves
        ctx._saved = tuple(jax.tree_util.tree_unflatten(spec.saved, self.tensors[:n]))
        rest = iter(self.tensors[n:])
        leaves = [next(rest) if v is _TENSOR else _unbox(v) for v in spec.attr_values]
        vars(ctx).update(jax.tree_util.tree_unflatten(spec.attrs, leaves))
        return ctx


def _among(y, tensors: tuple) -> bool:
    return any(y is t for t in tensors)  # NOTE: identity: `in` would compare tensors elementwise


def _in_avals(args: tuple) -> tuple:
    return tuple((a.shape, a.aval.dtype) if isinstance(a, Tensor) else None for a in args)


def _leaving(t):
    """`t`, about to leave a custom_vjp rule's body: a copy if it is a traced view.
    NOTE: works around `custom_derivatives._pure_body`: its `leave` reads a view at the body's own level (it lacks
    `with below(main)`), so a view returned by a rule escapes as the body's tracer. A copy is a base, read as it is;
    drop this once `leave` reads below the body."""
    return t.clone() if isinstance(t, Tracer) and getattr(t, "_chain", None) else t


# -- forward -------------------------------------------------------------------------------------------------------
class _WritesInput(AliasingError):
    """forward wrote into an argument of the custom_vjp's function: `apply` runs it again on clones."""


def _has_setup_context(cls) -> bool:
    return cls.setup_context is not Function.setup_context


def _run_forward(cls, ctx: FunctionCtx, args: tuple):
    if _has_setup_context(cls):
        out = cls.forward(*args)
        cls.setup_context(ctx, args, out)
        return out
    return cls.forward(ctx, *args)


def _forward(cls, args: tuple, clone: bool) -> tuple[_Out, FunctionCtx]:
    """forward on the arguments of the custom_vjp's function or `fwd` (static ones boxed): its output and ctx.
    Under a transform, with `clone`, on clones of the tensor arguments."""
    name = cls.__name__
    args = tuple(_unbox(a) for a in args)
    traced = any(isinstance(a, Tracer) for a in args)
    seen = tuple(a.clone() if clone and traced and isinstance(a, Tensor) else a for a in args)
    ctx = FunctionCtx(name, tuple(isinstance(a, Tensor) and is_differentiable(a.aval.dtype) for a in args))
    before = [_version(a) for a in seen]
    try:
        out = _run_forward(cls, ctx, seen)
    except AliasingError as e:
        if traced and not clone and not isinstance(e, _WritesInput):
            raise _WritesInput(str(e)) from e
        raise
    _check_writes(ctx, seen, before)
    return _output(ctx, out, seen), ctx


def _version(a):
    """`a`'s storage and its count of writes, for a tensor whose writes are counted (eager and functional ones)."""
    storage = a._storage if isinstance(a, Tensor) else None
    return (storage, storage.version) if hasattr(storage, "version") else None


def _check_writes(ctx: FunctionCtx, seen: tuple, before: list) -> None:
    dirty = {id(t._storage) for t in ctx._dirty if isinstance(t, Tensor)}
    for i, b in enumerate(before):
        if b is not None and b[0].version != b[1] and id(b[0]) not in dirty:
            raise AliasingError(f"{ctx._name}.forward wrote into its input {i} in place{where()} without marking it: "
                                f"call ctx.mark_dirty(x) for an input written in place and return it from forward, "
                                f"or write into a copy (x = x.clone())")


def _output(ctx: FunctionCtx, out, seen: tuple) -> _Out:
    name = ctx._name
    items = out if isinstance(out, tuple) else (out,)
    for j, y in enumerate(items):
        if not isinstance(y, Tensor) and _has_tensor(y):
            raise TypeError(f"{name}.forward returned a {type(y).__name__} holding tensors as output {j}{where()}; "
                            f"return tensors themselves, one output each (forward may return a tuple)")
    dirty = []
    for t in ctx._dirty:
        slot = next((j for j, y in enumerate(items) if y is t), None)
        if slot is None:
            raise AliasingError(f"{name}: a tensor marked with ctx.mark_dirty is not an output of forward{where()}; "
                                f"the inputs forward writes in place must all be outputs of the Function")
        dirty.extend((i, slot) for i, a in enumerate(seen) if a is t)
    frozen = tuple(j for j, y in enumerate(items) if _among(y, ctx._non_differentiable))
    spec = _OutSpec(isinstance(out, tuple), _statics(items), tuple(dirty), frozen)
    return _Out(tuple(_leaving(y) for y in items if isinstance(y, Tensor)), spec)


# -- backward ------------------------------------------------------------------------------------------------------
def _user_backward(cls) -> Callable:
    backward, vjp = cls.backward, cls.vjp
    if backward is not Function.backward and vjp is not Function.vjp:
        raise TypeError(f"{cls.__name__} defines both 'backward' and 'vjp', which are one method under two names; "
                        f"define only one of them")
    return vjp if vjp is not Function.vjp else backward


def _backward(cls, saved: _Saved, ct: _Out) -> tuple:
    """The custom_vjp's `bwd`: backward's gradients, one per tensor input."""
    name, spec = cls.__name__, saved.spec
    ctx = saved.ctx(name)
    grads = _user_backward(cls)(ctx, *_grad_outputs(ct, spec.materialize))
    grads = _one_per_input(name, grads, len(spec.in_avals))
    out = []
    for i, (g, aval) in enumerate(zip(grads, spec.in_avals)):
        if aval is not None:
            out.append(_leaving(_fit(name, i, g, aval)))
        elif g is not None:
            raise TypeError(f"{name}.backward returned a gradient that is not None for input {i}, which is not a "
                            f"tensor ({type(g).__name__}){where()}; return None for it")
    return tuple(out)


def _grad_outputs(ct: _Out, materialize: bool) -> list:
    """backward's arguments: the output cotangents; zeros (None if not `materialize`) for the outputs marked
    non-differentiable and the integer ones, None for the non-tensor ones."""
    def grad(j, g):
        if g is None or (j not in ct.spec.non_differentiable and is_differentiable(g.aval.dtype)):
            return g
        return zeros_like(g) if materialize else None
    return [grad(j, g) for j, g in enumerate(ct.items(static=lambda v: None))]


def _one_per_input(name: str, grads, n: int) -> tuple:
    grads = grads if isinstance(grads, tuple) else (grads,)
    if len(grads) > n and all(g is None for g in grads[n:]):
        grads = grads[:n]
    if len(grads) != n:
        raise TypeError(f"{name}.backward returned {len(grads)} gradients, expected {n}: one per input of forward "
                        f"(None for an input with no gradient){where()}")
    return grads


def _fit(name: str, i: int, g, aval: tuple):
    """`g` as the gradient of input `i`: PyTorch's checks, its sum over broadcast dimensions and its cast."""
    shape, dtype = aval
    if g is None or not is_differentiable(dtype):
        return None
    if not isinstance(g, Tensor):
        raise TypeError(f"{name}.backward returned a {type(g).__name__} as the gradient of input {i}{where()}; "
                        f"expected a tensor or None")
    if g.shape != shape:
        if not _expandable(shape, g.shape):
            raise ShapeError(f"{name}.backward returned a gradient of shape {list(g.shape)} for input {i}, which has "
                             f"shape {list(shape)}{where()}; a gradient has its input's shape (or one the input "
                             f"broadcasts to, which is summed back)")
        g = g.sum_to_size(*shape) if shape else g.sum()
    return g if g.aval.dtype == dtype else g.to(dtype)


def _expandable(shape: tuple, to: tuple) -> bool:
    return len(shape) <= len(to) and all(s in (1, t) for s, t in zip(reversed(shape), reversed(to)))


# -- the custom_vjp of a Function ----------------------------------------------------------------------------------
def _custom_vjp_of(cls, n_args: int, static: tuple[int, ...], clone: bool) -> custom_vjp:
    """The custom_vjp that `cls.apply` calls with `n_args` arguments, those at `static` not tensors; made once."""
    made = cls.__dict__.get("_aotjax_custom_vjps")
    if made is None:
        made = {}
        cls._aotjax_custom_vjps = made  # NOTE: in the class's own dict, so that a subclass gets its own
    key = (n_args, static, clone)
    found = made.get(key)
    return found if found is not None else made.setdefault(key, _make_custom_vjp(cls, static, clone))


def _make_custom_vjp(cls, static: tuple[int, ...], clone: bool) -> custom_vjp:
    name = cls.__name__

    def fun(*args):
        return _forward(cls, args, clone)[0]

    def fwd(*args):
        out, ctx = _forward(cls, args, clone)
        return out, _Saved.of(ctx, tuple(_unbox(a) for a in args))

    def bwd(*args):
        *_, saved, ct = args  # NOTE: the static arguments come first; _Saved has what backward needs of them
        return _backward(cls, saved, ct)

    fun.__name__ = fun.__qualname__ = name
    fwd.__name__, bwd.__name__ = f"{name}.forward", f"{name}.backward"
    made = custom_vjp(fun, nondiff_argnums=static)
    made.defvjp(fwd, bwd)
    return made


# NOTE: the Functions whose forward writes into an input, found when it does: under a transform, they run on clones
_WRITERS: weakref.WeakSet = weakref.WeakSet()


def _positional(cls, args: tuple, kwargs: dict) -> tuple:
    """`apply`'s arguments as forward's positional ones (PyTorch binds them to forward's signature, with its
    defaults, for a Function with setup_context)."""
    setup = _has_setup_context(cls)
    if not kwargs and not setup:
        return args
    try:
        signature = inspect.signature(cls.forward)
        bound = signature.bind(*args, **kwargs) if setup else signature.bind(None, *args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{cls.__name__}.apply: {e}{where()}") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(f"{cls.__name__}.apply: forward's keyword-only arguments {sorted(bound.kwargs)} cannot be "
                        f"passed{where()}; make them positional")
    return bound.args if setup else bound.args[1:]


def _call_args(name: str, args: tuple) -> tuple[tuple, tuple[int, ...]]:
    """The custom_vjp's arguments (non-tensors boxed when unhashable) and the positions of the static ones."""
    static = tuple(i for i, a in enumerate(args) if not isinstance(a, Tensor))
    for i in static:
        if _has_tensor(args[i]):
            raise TypeError(f"{name}.apply: argument {i} is a {type(args[i]).__name__} holding tensors{where()}; "
                            f"pass each tensor as an argument of its own (tensors inside containers get no gradient)")
    return tuple(_static(a) if i in static else a for i, a in enumerate(args)), static


# -- the user's surface --------------------------------------------------------------------------------------------
class Function:
    """A function with a derivative of your own, written as in PyTorch (`torch.autograd.Function`): subclass it,
    define the staticmethods `forward(ctx, *args)` and `backward(ctx, *grad_outputs)`, and call `MyFn.apply(*args)`.
    `backward` gets one gradient per output of forward and returns one per input (None for none). Instead of
    taking ctx, `forward(*args)` may leave the ctx to `setup_context(ctx, inputs, output)`. `apply` is a
    `custom_vjp` call, so it works eagerly and under `grad`, `vjp`, `jit` and `vmap` (this module's docstring
    says how the two map, and where they differ from PyTorch).

    >>> class ClampGrad(Function):
    ...     @staticmethod
    ...     def forward(ctx, x, bound):
    ...         ctx.bound = bound                 # a Python value: backward gets it as it is
    ...         return x.clone()
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         return g.clamp(-ctx.bound, ctx.bound), None
    >>> aotjax.grad(lambda x: (5.0 * ClampGrad.apply(x, 2.0)).sum())(aotjax.tensor([1.0, 2.0]))
    tensor([2., 2.])
    """

    # NOTE: PyTorch's flag for vmap; aotjax batches forward and backward themselves, with or without it.
    generate_vmap_rule = False

    def __init__(self, *args, **kwargs):
        warnings.warn(f"{type(self)} should not be instantiated. Methods on autograd functions are all static, so "
                      f"you should invoke them on the class itself: {type(self).__name__}.apply(...)",
                      DeprecationWarning, stacklevel=user_stacklevel())

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{type(self).__name__}: legacy autograd function with non-static forward method is "
                           f"deprecated. Please use new-style autograd function with static forward method: "
                           f"{type(self).__name__}.apply(...)")

    @staticmethod
    def forward(*args, **kwargs):
        """`forward(ctx, *args)`, or `forward(*args)` with `setup_context`: the Function's output (a tensor, or a
        tuple of outputs)."""
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple, output) -> None:
        """Fill `ctx` from forward's `inputs` and `output`, for a `forward` that takes no ctx."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs):
        """One gradient per input of forward (a tuple, or the gradient itself for one input), from one per
        output."""
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward  # NOTE: PyTorch's other name of backward

    @staticmethod
    def jvp(ctx: FunctionCtx, *grad_inputs):
        """Not used: a Function is a custom_vjp, which has no forward-mode derivative."""
        raise NotImplementedError("aotjax's autograd.Function has no forward mode: jvp is not used")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run the Function: `forward`'s output, which `backward` differentiates under `grad`, `vjp`, `jacrev`.
        Tensor arguments are differentiated; other arguments are static Python values.

        >>> class Square(Function):
        ...     @staticmethod
        ...     def forward(x):
        ...         return x * x
        ...     @staticmethod
        ...     def setup_context(ctx, inputs, output):
        ...         ctx.save_for_backward(inputs[0])
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * x * g
        >>> Square.apply(aotjax.tensor([3.0]))
        tensor([9.])
        >>> aotjax.vmap(aotjax.grad(lambda x: Square.apply(x).sum()))(aotjax.tensor([[1.0], [2.0]]))
        tensor([[2.],
                [4.]])
        """
        args = _positional(cls, args, kwargs)
        call_args, static = _call_args(cls.__name__, args)
        clone = cls in _WRITERS
        try:
            out = _custom_vjp_of(cls, len(args), static, clone)(*call_args)
        except _WritesInput:
            _WRITERS.add(cls)
            out = _custom_vjp_of(cls, len(args), static, True)(*call_args)
        return _result(out, args)


def _result(out: _Out, args: tuple):
    """`apply`'s result from the custom_vjp's: an input forward wrote in place is written here (under a transform
    forward wrote a clone) and returned itself."""
    items = out.items()
    for i, j in out.spec.dirty:
        if items[j] is not args[i]:
            args[i].copy_(items[j])
            items[j] = args[i]
    return tuple(items) if out.spec.is_tuple else items[0]


def once_differentiable(fn: Callable) -> Callable:
    """PyTorch's decorator of a `backward` that is not itself differentiable; here `fn` itself (aotjax traces
    backward, so a second derivative differentiates it).

    >>> once_differentiable(abs) is abs
    True
    """
    return fn
