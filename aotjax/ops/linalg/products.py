"""PyTorch's products beyond `matmul`: `addmm addmv addbmm baddbmm addr` (`beta * input + alpha * product`, with
torch's rule that `beta = 0` ignores `input`, NaNs included) and their in-place Tensor methods, `mv inner vdot kron
tensordot cross cdist chain_matmul`. All are compositions of `matmul`/`einsum` and elementwise ops, so every
transform applies with no rules of their own.
"""
from __future__ import annotations

import string

import jax.numpy as jnp
import numpy as np

from aotjax.autograd import graph
from aotjax.core.errors import ShapeError, UnsupportedError
from aotjax.core.interpreter import Tracer, stack_of_this_thread, staging
from aotjax.core.source_info import where
from aotjax.ops.base import autocast
from aotjax.ops.base.casts import convert
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.frontend import write_out
from aotjax.ops.base.promotion import check_inplace_cast, result_type
from aotjax.ops.indexing.subscripts import copy_, copy__p
from aotjax.ops.linalg import decompositions as dec
from aotjax.ops.linalg.matmul import _same_dtype, einsum, matmul
from aotjax.ops.linalg.norms import vector_norm
from aotjax.ops.math.elementwise import scalar_coefficient
from aotjax.tensor import Storage, Tensor, method

__all__ = ["addmm", "addmv", "addbmm", "baddbmm", "addr", "mv", "inner", "vdot", "kron", "tensordot", "cross",
           "cdist", "chain_matmul"]


def _check(op: str, ok: bool, message: str) -> None:
    if not ok:
        raise ShapeError(f"{op}: {message}{where()}")


def _shapes(*xs) -> str:
    return " and ".join(str(list(x.shape)) for x in xs)


def _scaled_sum(op: str, input, product, beta, alpha):
    """`beta * input + alpha * product`; with `beta == 0`, `input` is not read (torch's rule: NaN and inf in it are
    ignored), with `alpha == 1` / `beta == 1` no multiplication. `input` must expand to `product`'s shape (torch's
    rule: it broadcasts one way only, never enlarging the result). For an integer result a float `beta`/`alpha` is
    truncated toward zero (torch's rule; `addr` refuses it, as torch's does); for a bool one both are bools."""
    shape, got = tuple(product.shape), tuple(input.shape)
    _check(op, len(got) <= len(shape) and all(g in (1, n) for g, n in zip(got[::-1], shape[::-1])),
           f"input of shape {list(got)} cannot be expanded to the result's shape {list(shape)}")
    beta = scalar_coefficient(op, "beta", beta, product.dtype, truncates=op != "addr")
    alpha = scalar_coefficient(op, "alpha", alpha, product.dtype, truncates=op != "addr")
    product = product if alpha == 1 else product * alpha
    if beta == 0:
        return product
    return (input if beta == 1 else input * beta) + product


@autocast.lower
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """`beta * input + alpha * (mat1 @ mat2)` for matrices `mat1`, `mat2` (`input` broadcasts), as `torch.addmm`.

    >>> aotjax.addmm(aotjax.ones(2, 2), aotjax.eye(2), aotjax.eye(2), beta=2.0)
    tensor([[3., 2.],
            [2., 3.]])
    """
    input, mat1, mat2 = as_tensor(input), as_tensor(mat1), as_tensor(mat2)
    _check("addmm", mat1.ndim == 2 and mat2.ndim == 2, f"expected 2-D matrices, got shapes {_shapes(mat1, mat2)}")
    _check("addmm", mat1.shape[1] == mat2.shape[0], f"shapes {_shapes(mat1, mat2)} cannot be multiplied")
    _same_dtype("addmm", input, mat1, mat2)
    return _scaled_sum("addmm", input, matmul(mat1, mat2), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """`beta * input + alpha * (mat @ vec)`, as `torch.addmv`.

    >>> aotjax.addmv(aotjax.ones(2), aotjax.eye(2), aotjax.tensor([1.0, 2.0]))
    tensor([2., 3.])
    """
    input, mat, vec = as_tensor(input), as_tensor(mat), as_tensor(vec)
    _check("addmv", mat.ndim == 2 and vec.ndim == 1, f"expected a matrix and a vector, got shapes {_shapes(mat, vec)}")
    _check("addmv", mat.shape[1] == vec.shape[0], f"shapes {_shapes(mat, vec)} cannot be multiplied")
    _same_dtype("addmv", input, mat, vec)
    return _scaled_sum("addmv", input, matmul(mat, vec), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """`beta * input + alpha * sum_i (batch1[i] @ batch2[i])`, as `torch.addbmm`. Its in-place form `addbmm_`, as
    torch's, resizes a `self` of another shape that expands to the result's (an eager tensor, not a view, outside
    any transform).

    >>> aotjax.addbmm(aotjax.zeros(2, 2), aotjax.ones(3, 2, 1), aotjax.ones(3, 1, 2))
    tensor([[3., 3.],
            [3., 3.]])
    """
    input, b1, b2 = as_tensor(input), as_tensor(batch1), as_tensor(batch2)
    _check("addbmm", b1.ndim == 3 and b2.ndim == 3, f"expected 3-D tensors, got shapes {_shapes(b1, b2)}")
    _check("addbmm", b1.shape[0] == b2.shape[0] and b1.shape[2] == b2.shape[1],
           f"shapes {_shapes(b1, b2)} cannot be multiplied batch by batch")
    _same_dtype("addbmm", input, b1, b2)
    return _scaled_sum("addbmm", input, einsum("bij,bjk->ik", b1, b2), beta, alpha)


@autocast.lower
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """`beta * input + alpha * bmm(batch1, batch2)`, as `torch.baddbmm`.

    >>> aotjax.baddbmm(aotjax.zeros(3, 2, 2), aotjax.ones(3, 2, 1), aotjax.ones(3, 1, 2)).shape
    (3, 2, 2)
    """
    input, b1, b2 = as_tensor(input), as_tensor(batch1), as_tensor(batch2)
    _check("baddbmm", b1.ndim == 3 and b2.ndim == 3, f"expected 3-D tensors, got shapes {_shapes(b1, b2)}")
    _check("baddbmm", b1.shape[0] == b2.shape[0] and b1.shape[2] == b2.shape[1],
           f"shapes {_shapes(b1, b2)} cannot be multiplied batch by batch")
    _same_dtype("baddbmm", input, b1, b2)
    return _scaled_sum("baddbmm", input, matmul(b1, b2), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """`beta * input + alpha * outer(vec1, vec2)`, as `torch.addr`.

    >>> aotjax.addr(aotjax.zeros(2, 2), aotjax.tensor([1.0, 2.0]), aotjax.tensor([1.0, 3.0]))
    tensor([[1., 3.],
            [2., 6.]])
    """
    input, v1, v2 = as_tensor(input), as_tensor(vec1), as_tensor(vec2)
    _check("addr", v1.ndim == 1 and v2.ndim == 1, f"expected 1-D vectors, got shapes {_shapes(v1, v2)}")
    dtype = result_type(input, v1, v2)  # NOTE: torch's addr promotes its operands (the other products do not)
    input, v1, v2 = (convert(t, dtype) for t in (input, v1, v2))
    outer = v1.unsqueeze(1) & v2 if v1.dtype == np.bool_ else einsum("i,j->ij", v1, v2)  # NOTE: bools stay bools
    return _scaled_sum("addr", input, outer, beta, alpha)


def _inplace(fn, resizes: bool = False):
    """`fn`'s in-place Tensor method; where `resizes` (torch's `addbmm_` alone), a `self` of another shape that
    expands to the result's is resized to it, as torch does (its `out=` rule, without the warning)."""
    name = fn.__name__ + "_"

    def inplace(self, *args, beta=1, alpha=1):
        out = fn(self, *args, beta=beta, alpha=alpha)
        check_inplace_cast(name, out.dtype, self.dtype)
        if resizes and tuple(out.shape) != tuple(self.shape):
            _resize_written(name, self, out)
        _check(name, tuple(out.shape) == tuple(self.shape),
               f"the result of shape {list(out.shape)} does not fit the tensor written in place, of shape "
               f"{list(self.shape)}")
        return copy_(self, out)
    inplace.__name__ = name
    inplace.__doc__ = f"In-place `{fn.__name__}` (a Tensor method): writes the result into `self`."
    return inplace


# NOTE: the transform that pushes each trace class, for the error below (the outermost names what the user called)
_TRANSFORMS = {"JaxprTrace": "jit (or make_jaxpr)", "FunctionalizeTrace": "functionalize", "JVPTrace": "jvp",
               "PartialEvalTrace": "grad (or vjp)", "BatchTrace": "vmap"}


def _resize_written(op: str, self, out) -> None:
    """`self` given a new storage of `out`'s shape, as `out=` resizes (aotjax/ops/base/frontend.py `write_out`): an
    eager base tensor only; a traced tensor or a view cannot change shape here."""
    shape, got = list(out.shape), list(self.shape)
    if isinstance(self, Tracer) or staging():
        outer = stack_of_this_thread()[1].trace_type.__name__
        raise UnsupportedError(
            f"{op}: the result has shape {shape} but the tensor written in place has shape {got}: torch resizes it, "
            f"but under {_TRANSFORMS.get(outer, outer)} a tensor cannot change its shape in place{where()}. Write "
            f"into a tensor of the result's shape (`self = self.expand({shape}).clone()` first), or use the "
            f"out-of-place `{op[:-1]}`")
    if self._chain:
        raise ShapeError(f"{op}: the result has shape {shape} but the view written in place has shape {got}: torch "
                         f"resizes it, but aotjax cannot resize a view{where()}; write into its base, or a tensor of "
                         f"shape {shape}")
    graph.check_write(copy__p, (self, out))  # NOTE: torch's error for a leaf that requires grad, before any change
    # NOTE: as `Tensor.data = ...` does: a tensor that requires grad still does (the write below records its new
    # value), and a leaf (written under no_grad) stays a leaf
    ag, leaf = self._ag, graph.leaf_of(self)
    self._init_slots(None, storage=Storage(jnp.zeros(shape, self.dtype)))
    self._ag = ag
    if leaf is not None:
        self._storage.grad_node = leaf


def _resizes_out_silently(fn):
    """`fn` taking `out=`, an eager `out` of another shape resized without `write_out`'s warning: torch's `addbmm`
    (as its `addbmm_` resizes `self`)."""
    def op(input, batch1, batch2, *, beta=1, alpha=1, out=None):
        result = fn(input, batch1, batch2, beta=beta, alpha=alpha)
        if isinstance(out, Tensor) and tuple(out.shape) != tuple(result.shape):
            _resize_written(fn.__name__, out, result)
        return result if out is None else write_out(fn.__name__, result, out)
    op.__name__, op.__qualname__, op.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return op


def mv(input, vec):
    """The product of a matrix and a vector, as `torch.mv`.

    >>> aotjax.mv(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]]), aotjax.tensor([1.0, 1.0]))
    tensor([3., 7.])
    """
    input, vec = as_tensor(input), as_tensor(vec)
    _check("mv", input.ndim == 2 and vec.ndim == 1, f"expected a matrix and a vector, got shapes "
           f"{_shapes(input, vec)}")
    _check("mv", input.shape[1] == vec.shape[0], f"shapes {_shapes(input, vec)} cannot be multiplied")
    _same_dtype("mv", input, vec)
    return matmul(input, vec)


def inner(input, other):
    """The inner product over the last dims (a 0-d operand multiplies), as `torch.inner`.

    >>> aotjax.inner(aotjax.tensor([[1.0, 2.0]]), aotjax.tensor([[3.0, 4.0], [1.0, 0.0]]))
    tensor([[11.,  1.]])
    """
    a, b = as_tensor(input), as_tensor(other)
    _same_dtype("inner", a, b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    _check("inner", a.shape[-1] == b.shape[-1], f"the last dims of shapes {_shapes(a, b)} differ")
    return tensordot(a, b, dims=([a.ndim - 1], [b.ndim - 1]))


def vdot(input, other):
    """The dot product of two 1-D tensors, as `torch.vdot` (real tensors: no conjugation).

    >>> aotjax.vdot(aotjax.tensor([1.0, 2.0]), aotjax.tensor([3.0, 4.0]))
    tensor(11.)
    """
    a, b = as_tensor(input), as_tensor(other)
    _check("vdot", a.ndim == 1 and b.ndim == 1 and a.shape == b.shape, f"expected 1-D tensors of one length, got "
           f"shapes {_shapes(a, b)}")
    _same_dtype("vdot", a, b)
    return matmul(a, b)


def kron(input, other):
    """The Kronecker product, as `torch.kron` (the operand with fewer dims gets leading size-1 dims).

    >>> aotjax.kron(aotjax.eye(2), aotjax.tensor([[1.0, 2.0]]))
    tensor([[1., 2., 0., 0.],
            [0., 0., 1., 2.]])
    """
    a, b = as_tensor(input), as_tensor(other)
    n = max(a.ndim, b.ndim)
    a = a.reshape((1,) * (n - a.ndim) + tuple(a.shape))
    b = b.reshape((1,) * (n - b.ndim) + tuple(b.shape))
    la, lb = string.ascii_lowercase[:n], string.ascii_uppercase[:n]
    _same_dtype("kron", a, b)
    out = einsum(f"{la},{lb}->{''.join(x + y for x, y in zip(la, lb))}", a, b)
    return out.reshape(tuple(i * j for i, j in zip(a.shape, b.shape)))


def tensordot(a, b, dims=2):
    """The sum of products over the dims `dims` of `a` and `b` (an int: `a`'s last and `b`'s first `dims` dims;
    or two lists of dims), as `torch.tensordot`.

    >>> aotjax.tensordot(aotjax.ones(2, 3, 4), aotjax.ones(3, 4, 5)).shape
    (2, 5)
    >>> aotjax.tensordot(aotjax.ones(2, 3), aotjax.ones(3, 2), dims=([1], [0])).shape
    (2, 2)
    """
    a, b = as_tensor(a), as_tensor(b)
    if isinstance(dims, (int, np.integer)):
        _check("tensordot", 0 <= dims <= min(a.ndim, b.ndim), f"dims={dims} must be in [0, {min(a.ndim, b.ndim)}]")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
    _check("tensordot", len(da) == len(db), f"dims lists {da} and {db} differ in length")
    da, db = [d % max(a.ndim, 1) for d in da], [d % max(b.ndim, 1) for d in db]
    for i, j in zip(da, db):
        _check("tensordot", a.shape[i] == b.shape[j] or 1 in (a.shape[i], b.shape[j]), f"contracted dims {i} of "
               f"{list(a.shape)} and {j} of {list(b.shape)} differ in size ({a.shape[i]} and {b.shape[j]}): they "
               f"must match, or one be 1")
        # NOTE: torch broadcasts a size-1 dim against the other: the other side is summed over it first
        if a.shape[i] == 1 != b.shape[j]:
            b = b.sum(j, keepdim=True, dtype=b.dtype)
        elif b.shape[j] == 1 != a.shape[i]:
            a = a.sum(i, keepdim=True, dtype=a.dtype)
    _same_dtype("tensordot", a, b)
    letters = iter(string.ascii_letters)
    la = [next(letters) for _ in range(a.ndim)]
    lb = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(da, db):
        lb[j] = la[i]
    out = [la[i] for i in range(a.ndim) if i not in da] + [lb[j] for j in range(b.ndim) if j not in db]
    return einsum(f"{''.join(la)},{''.join(lb)}->{''.join(out)}", a, b)


def cross(input, other, dim=None):
    """The cross product of 3-vectors along `dim`, as `torch.cross` (default: the first dim of size 3; pass
    `dim`, as torch recommends, or use `aotjax.linalg.cross`).

    >>> aotjax.cross(aotjax.tensor([0.0, 1.0, 0.0]), aotjax.tensor([0.0, 0.0, 1.0]))
    tensor([1., 0., 0.])
    """
    a, b = as_tensor(input), as_tensor(other)
    if dim is None:
        shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        dim = next((i for i, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise ShapeError(f"cross: no dimension of size 3 in shapes {_shapes(a, b)}{where()}")
    return dec.cross(a, b, dim=dim)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The `p`-norm distance between each pair of rows of `x1` `[..., P, M]` and `x2` `[..., R, M]`, as
    `torch.cdist` (`[..., P, R]`; computed directly, whatever `compute_mode`; the derivative at a zero distance
    is zero, as torch's).

    >>> aotjax.cdist(aotjax.tensor([[0.0, 0.0]]), aotjax.tensor([[3.0, 4.0], [1.0, 0.0]]))
    tensor([[5., 1.]])
    """
    x1, x2 = as_tensor(x1), as_tensor(x2)
    _check("cdist", x1.ndim >= 2 and x2.ndim >= 2, f"expected at least 2-D tensors, got shapes {_shapes(x1, x2)}")
    _check("cdist", x1.shape[-1] == x2.shape[-1], f"the last dims of shapes {_shapes(x1, x2)} (the vectors' size) "
           f"differ")
    _check("cdist", p >= 0, f"p must be non-negative, got {p}")
    _same_dtype("cdist", x1, x2)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if diff.numel() == 0:  # NOTE: no pairs, or vectors of size 0 (distance 0, torch's), for every p: inf's too
        return diff.new_zeros(diff.shape[:-1])
    return vector_norm(diff, ord=p, dim=-1)


def chain_matmul(*matrices):
    """The product of a chain of matrices, as the deprecated `torch.chain_matmul` (see `linalg.multi_dot`).

    >>> aotjax.chain_matmul(aotjax.eye(2), aotjax.ones(2, 3)).shape
    (2, 3)
    """
    if len(matrices) == 1:
        return as_tensor(matrices[0]).clone()
    return dec.multi_dot(matrices)


# -- Tensor methods ----------------------------------------------------------------------------------------
for _op in (addmm, addmv, addbmm, baddbmm, addr, mv, inner, vdot, kron, cross):
    method(_op)
for _op in (addmm, addmv, addbmm, baddbmm, addr):
    method(_inplace(_op, resizes=_op is addbmm))

# NOTE: `addbmm`'s `out=` resizes without torch's warning (torch's quirk); the other products' `out=` are the
# `OUT_OPS` of aotjax/ops/base/frontend.py
addbmm = _resizes_out_silently(addbmm)
method(addbmm)  # NOTE: `Tensor.addbmm is aotjax.addbmm`, as with_out_variants keeps it for the others
