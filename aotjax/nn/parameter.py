"""`Parameter`: the tensor kind a `Module` registers as a learnable weight, as `torch.nn.Parameter`."""
from __future__ import annotations

from aotjax.autograd import graph
from aotjax.core.interpreter import Tracer
from aotjax.core.source_info import where
from aotjax.ops.creation.factories import empty
from aotjax.tensor import Tensor

__all__ = ["Parameter"]


class Parameter(Tensor):
    """A Tensor that a `Module` registers as a parameter when assigned as one of its attributes. It shares
    the storage of `data` (no copy: writes through either are seen by both); ops on it return plain Tensors,
    in-place ops write into it.

    A parameter requires grad unless made with `requires_grad=False` (a leaf: `loss.backward()` accumulates into its
    `.grad`); gradients also come from `aotjax.grad` / `value_and_grad` of a function of the parameters.

    >>> w = aotjax.nn.Parameter(aotjax.ones(2))
    >>> w
    Parameter containing:
    tensor([1., 1.], requires_grad=True)
    >>> (w * 2).grad_fn.name(), w.requires_grad, w.is_leaf
    ('MulBackward0', True, True)
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: data must be an aotjax Tensor, got {type(data).__name__}{where()}; "
                            f"convert it first with aotjax.tensor(...)")
        if isinstance(data, Tracer):
            raise TypeError(f"Parameter: cannot wrap a traced tensor ({data.aval.str_short()}){where()}: a "
                            f"Parameter is an eager tensor. Build modules outside the transformed function and "
                            f"pass them to it (a Module is a pytree), or use aotjax.func.functional_call")
        p = object.__new__(cls)
        if requires_grad and data._chain:  # NOTE: a leaf is a whole storage (`aotjax.autograd.graph.mark_leaf`)
            data = data.clone()
        p._init_slots(data._aval, data._strides, data._offset, storage=data._storage, chain=data._chain)
        if requires_grad:
            graph.mark_leaf(p)
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        pass  # NOTE: everything is set by __new__; Tensor.__init__ would build a new tensor from data

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return Parameter, (_plain(self), self.requires_grad)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = Parameter(self.clone(), self.requires_grad)
        memo[id(self)] = result
        return result


def _plain(p: Parameter) -> Tensor:
    """A plain Tensor viewing the same data as `p` (what a pickled Parameter is rebuilt from)."""
    t = object.__new__(Tensor)
    t._init_slots(p._aval, p._strides, p._offset, storage=p._storage, chain=p._chain)
    return t
