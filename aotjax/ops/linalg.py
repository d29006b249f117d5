"""Linear algebra: `matmul` (PyTorch/NumPy semantics, 1-D operands and batch broadcasting) and
`einsum` are the primitives; `mm`, `bmm`, `dot`, `outer` and `linear` check their stricter shapes
and compose them. Operands must have one dtype, as in PyTorch (integer matmul is allowed);
`outer` promotes, as PyTorch's does.
"""
from __future__ import annotations

import jax.numpy as jnp

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.source_info import where
from aotjax.ops._combinators import broadcast_shapes, same_dtype, standard_primitive
from aotjax.ops._frontend import as_tensor, promote

__all__ = ["matmul", "mm", "bmm", "dot", "outer", "einsum", "linear"]


# -- matmul ------------------------------------------------------------------------------------
def _inner_mismatch(op: str, a_shape, b_shape) -> str | None:
    """The error message if `a @ b` cannot contract (a's last dim against b's second-to-last)."""
    k_a, k_b = a_shape[-1], b_shape[-2] if len(b_shape) > 1 else b_shape[0]
    if k_a != k_b:
        return f"{op}: shapes {list(a_shape)} and {list(b_shape)} cannot be multiplied ({k_a} != {k_b})"
    return None


def _matmul_shape(a, b):
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: both operands need at least 1 dimension, got shapes {list(a.shape)} and "
                         f"{list(b.shape)}; use `mul` (`*`) to multiply by a scalar")
    message = _inner_mismatch("matmul", a.shape, b.shape)
    if message:
        raise ShapeError(message)
    batch = broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2])
    return batch + a.shape[-2:-1] + (b.shape[-1:] if b.ndim > 1 else ())


matmul_p = standard_primitive("matmul", _matmul_shape, lambda a, b: same_dtype("matmul", a, b), jnp.matmul)


def _same_dtype(op: str, *operands) -> None:
    if len({x.dtype for x in operands}) > 1:
        got = " and ".join(x.aval.str_short() for x in operands)
        raise DTypeError(f"{op}: expected operands of one dtype, got {got}{where()}; convert one first "
                         f"(e.g. `b.to(a.dtype)`)")


def _check(op: str, ok: bool, message: str) -> None:
    if not ok:
        raise ShapeError(f"{op}: {message}{where()}")


def matmul(a, b):
    """The matrix product with NumPy semantics: 1-D operands are vectors (their added dim is removed
    from the result), leading dims are batch dims that broadcast. `a @ b` calls this.

    >>> aotjax.matmul(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]]), aotjax.tensor([1.0, 1.0]))
    tensor([3., 7.])
    >>> aotjax.matmul(aotjax.ones(5, 2, 3), aotjax.ones(3, 4)).shape
    (5, 2, 4)
    """
    a, b = as_tensor(a), as_tensor(b)
    _same_dtype("matmul", a, b)
    return matmul_p.bind(a, b)


def mm(a, b):
    """The product of two matrices (2-D only; see `matmul` for the general case).

    >>> aotjax.mm(aotjax.tensor([[1, 2]]), aotjax.tensor([[3], [4]]))
    tensor([[11]])
    """
    a, b = as_tensor(a), as_tensor(b)
    _check("mm", a.ndim == 2 and b.ndim == 2, f"expected 2-D tensors, got shapes {list(a.shape)} and {list(b.shape)}")
    _check("mm", _inner_mismatch("mm", a.shape, b.shape) is None, f"shapes {list(a.shape)} and {list(b.shape)} "
           f"cannot be multiplied ({a.shape[1]} != {b.shape[0]})")
    _same_dtype("mm", a, b)
    return matmul_p.bind(a, b)


def bmm(a, b):
    """Batched matrix product of 3-D tensors `[B, n, m] @ [B, m, p]` (no broadcasting).

    >>> aotjax.bmm(aotjax.ones(4, 2, 3), aotjax.ones(4, 3, 5)).shape
    (4, 2, 5)
    """
    a, b = as_tensor(a), as_tensor(b)
    shapes = f"{list(a.shape)} and {list(b.shape)}"
    _check("bmm", a.ndim == 3 and b.ndim == 3, f"expected 3-D tensors, got shapes {shapes}")
    _check("bmm", a.shape[0] == b.shape[0], f"batch sizes differ, got shapes {shapes} ({a.shape[0]} != "
           f"{b.shape[0]})")
    _check("bmm", a.shape[2] == b.shape[1], f"shapes {shapes} cannot be multiplied ({a.shape[2]} != {b.shape[1]})")
    _same_dtype("bmm", a, b)
    return matmul_p.bind(a, b)


def dot(a, b):
    """The inner product of two 1-D tensors of one length (a 0-d tensor).

    >>> aotjax.dot(aotjax.tensor([1, 2]), aotjax.tensor([3, 4]))
    tensor(11)
    """
    a, b = as_tensor(a), as_tensor(b)
    shapes = f"{list(a.shape)} and {list(b.shape)}"
    _check("dot", a.ndim == 1 and b.ndim == 1, f"expected 1-D tensors, got shapes {shapes}")
    _check("dot", a.shape == b.shape, f"expected tensors of one length, got shapes {shapes}")
    _same_dtype("dot", a, b)
    return matmul_p.bind(a, b)


# -- einsum ------------------------------------------------------------------------------------
# NOTE: no shape rule of its own: the abstract value comes from `jnp.einsum` through
# `jax.eval_shape`, whose error is reported as an einsum ShapeError with the operand shapes.
einsum_p = standard_primitive("einsum", None, None, lambda *xs, equation: jnp.einsum(equation, *xs))


def einsum(equation: str, *operands):
    """Einstein summation, as `torch.einsum` (operands may also be passed as one list).

    >>> aotjax.einsum('ij,j->i', aotjax.tensor([[1.0, 2.0], [3.0, 4.0]]), aotjax.tensor([1.0, 1.0]))
    tensor([3., 7.])
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a string such as 'ij,jk->ik', got "
                        f"{type(equation).__name__}{where()}")
    operands = tuple(as_tensor(x) for x in operands)
    _same_dtype("einsum", *operands)
    return einsum_p.bind(*operands, equation=equation.replace(" ", ""))


def outer(a, b):
    """The outer product of two 1-D tensors: `out[i, j] = a[i] * b[j]` (dtypes are promoted).

    >>> aotjax.outer(aotjax.tensor([1, 2]), aotjax.tensor([1, 10, 100]))
    tensor([[  1,  10, 100],
            [  2,  20, 200]])
    """
    a, b = as_tensor(a), as_tensor(b)
    _check("outer", a.ndim == 1 and b.ndim == 1, f"expected 1-D tensors, got shapes {list(a.shape)} and "
           f"{list(b.shape)}")
    return einsum_p.bind(*promote(a, b), equation="i,j->ij")


def linear(x, weight, bias=None):
    """`x @ weight.T + bias`, as `torch.nn.functional.linear` (`weight` is `[out_features, in_features]`).

    >>> aotjax.linear(aotjax.ones(2, 3), aotjax.ones(4, 3), aotjax.tensor([0.0, 1.0, 2.0, 3.0]))
    tensor([[3., 4., 5., 6.],
            [3., 4., 5., 6.]])
    """
    x, weight = as_tensor(x), as_tensor(weight)
    _check("linear", weight.ndim in (1, 2), f"expected a 1-D or 2-D weight, got shape {list(weight.shape)}")
    _check("linear", x.ndim >= 1 and x.shape[-1] == weight.shape[-1],
           f"input of shape {list(x.shape)} does not fit weight of shape {list(weight.shape)} (the input's last dim "
           f"must equal in_features = {weight.shape[-1]})")
    _same_dtype("linear", x, weight)
    out = matmul_p.bind(x, weight.t())
    return out if bias is None else out + bias
