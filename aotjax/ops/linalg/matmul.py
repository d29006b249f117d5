"""Linear algebra: `matmul` (PyTorch/NumPy semantics, 1-D operands and batch broadcasting) and
`einsum` are the primitives; `mm`, `bmm`, `dot`, `outer` and `linear` check their stricter shapes
and compose them. Operands must have one dtype, as in PyTorch (integer matmul is allowed);
`outer` promotes, as PyTorch's does.
"""
from __future__ import annotations

import math
import string

import jax.numpy as jnp

from aotjax.autograd.graph import RecordingTensor, fast_operand
from aotjax.core.avals import ShapedArray, get_aval
from aotjax.core.call_epoch import running as _transforms
from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.interpreter import _state
from aotjax.core.primitive import Recompute
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import Zero
from aotjax.interpreters.batching import batching_rules, moveaxis, not_mapped
from aotjax.interpreters.eval import apply_plain, apply_recording
from aotjax.interpreters.jvp import defjvp, jvp_rules, sum_tangents
from aotjax.interpreters.transpose import deflinear2_transpose, linear_operand, transpose_rules
from aotjax.ops.base import autocast
from aotjax.ops.base.combinators import broadcast_shapes, same_dtype, standard_primitive
from aotjax.ops.base.data import as_tensor, promote
from aotjax.ops.calls.eager_fusion import fused_when_eager
from aotjax.ops.creation.factories import eye, ones
from aotjax.ops.shape.views import permute_p, view_p
from aotjax.tensor import Tensor, method, reflected

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


def _matmul_flops(in_avals, out_avals) -> float:
    (a, _), (out,) = in_avals, out_avals
    return 2.0 * out.size * a.shape[-1]  # a multiply and an add per output element and contracted index


matmul_p = standard_primitive("matmul", _matmul_shape, lambda a, b: same_dtype("matmul", a, b), jnp.matmul,
                              recompute=Recompute.EXPENSIVE, flops=_matmul_flops, is_dot=True)
defjvp(matmul_p, lambda t, a, b: matmul_p.bind(t, b), lambda t, a, b: matmul_p.bind(a, t))


def _matmul_batch(axis_size, vals, dims):
    """One `matmul`: each batched operand gets its batch axis first, as a leading batch dim of the product, with
    size-1 dims after it so that the examples' own batch dims broadcast as they would per example. A 1-D example
    operand becomes a matrix (`[1, k]` on the left, `[k, 1]` on the right); the product is then viewed at the
    examples' result shape, which drops the dims that adds."""
    examples = [_example_aval(v, d) for v, d in zip(vals, dims)]
    if dims[0] is not_mapped and len(examples[0].shape) == 2 and len(examples[1].shape) in (1, 2):
        return [_matrix_times_batched(vals[0], moveaxis(vals[1], dims[1], 0))], [0]
    if dims[1] is not_mapped and len(examples[0].shape) == 1 and len(examples[1].shape) == 2:
        return [matmul_p.bind(moveaxis(vals[0], dims[0], 0), vals[1])], [0]  # NOTE: batched rows times a matrix
    out_shape = (axis_size,) + _matmul_shape(*examples)
    n_batch = max(len(e.shape) - 2 for e in examples)
    operands = []
    for i, (v, d, e) in enumerate(zip(vals, dims, examples)):
        if d is not_mapped:
            operands.append(v)
            continue
        shape = e.shape if len(e.shape) >= 2 else ((1,) + e.shape if i == 0 else e.shape + (1,))
        pad = max(n_batch - (len(shape) - 2), 0)
        v = moveaxis(v, d, 0)
        want = (axis_size,) + (1,) * pad + shape
        operands.append(v if tuple(v.shape) == want else view_p.bind(v, shape=want))
    out = matmul_p.bind(*operands)
    return [out if tuple(out.shape) == out_shape else view_p.bind(out, shape=out_shape)], [0]


def _matrix_times_batched(a, x):
    """`a @ x[i]` for every example of `x` (batched at 0), `a` a matrix: one matrix product with the examples' rows
    on the left (`x[i]^T @ a^T`), so that neither is `a` broadcast over the examples nor the product transposed
    (for vectors and single columns, as a backward pass's cotangents are)."""
    if x.ndim == 2:  # vectors: the rows of the left operand
        return matmul_p.bind(x, _mT(a))
    out = matmul_p.bind(_mT(x), _mT(a))  # [B, n, m]
    n, m = out.shape[1:]
    return view_p.bind(out, shape=(out.shape[0], m, 1)) if n == 1 else _mT(out)


def _example_aval(v, d) -> ShapedArray:
    aval = get_aval(v)
    return aval if d is not_mapped else ShapedArray(aval.shape[:d] + aval.shape[d + 1:], aval.dtype)


batching_rules[matmul_p] = _matmul_batch


def _reshape(x, shape):
    return x if tuple(x.shape) == tuple(shape) else view_p.bind(x, shape=tuple(shape))


def _matrix_shape(x, left: bool) -> tuple:
    return tuple(x.shape) if x.ndim > 1 else ((1,) + tuple(x.shape) if left else tuple(x.shape) + (1,))


def _as_matrix(x, left: bool):
    """A 1-D matmul operand as the matrix it stands for: `[1, k]` on the left, `[k, 1]` on the right."""
    return _reshape(x, _matrix_shape(x, left))


def _mT(x):
    n = x.ndim
    return permute_p.bind(x, perm=tuple(range(n - 2)) + (n - 1, n - 2))


def _matmul_ct(ct, a, b):
    """The output cotangent with the dims matmul dropped for 1-D operands put back."""
    shape = tuple(ct.shape) + ((1,) if b.ndim == 1 else ())
    return _reshape(ct, shape[:-1] + (1,) + shape[-1:] if a.ndim == 1 else shape)


def _matmul_transpose_summed(ct, a, b, i: int):
    """Operand i's cotangent (`ct` from `_matmul_ct`) when the operand was broadcast along batch dims of the
    product: one einsum that sums those dims inside the contraction (as `dot_general` does), so that no
    batched `[..., k, n]` product is formed and then reduced. Size-1 broadcast batch dims are squeezed out."""
    batch = string.ascii_uppercase[:ct.ndim - 2]

    def spec(x, left: bool):  # x as a matrix with its size-1 broadcast batch dims dropped, and its labels
        shape = _matrix_shape(x, left)
        lead = len(batch) - (len(shape) - 2)
        kept = [d for d in range(len(shape) - 2) if shape[d] == ct.shape[lead + d]]
        labels = "".join(batch[lead + d] for d in kept) + ("mk" if left else "kn")
        return tuple(shape[d] for d in kept) + shape[-2:], labels

    (shape_a, la), (shape_b, lb) = spec(a, True), spec(b, False)
    if i == 0:
        out = einsum_p.bind(ct, _reshape(b, shape_b), equation=f"{batch}mn,{lb}->{la}")
    else:
        out = einsum_p.bind(_reshape(a, shape_a), ct, equation=f"{la},{batch}mn->{lb}")
    return _reshape(out, (a, b)[i].shape)


def _ct_batch(ct, a, b) -> tuple:
    return tuple(ct.shape[:ct.ndim - (a.ndim > 1) - (b.ndim > 1)])


def _matmul_transpose_a(ct, a, b):
    if _matrix_shape(a, True)[:-2] != _ct_batch(ct, a, b):
        return _matmul_transpose_summed(_matmul_ct(ct, a, b), a, b, 0)
    return _reshape(matmul_p.bind(_matmul_ct(ct, a, b), _mT(_as_matrix(b, left=False))), a.shape)


def _matmul_transpose_b(ct, a, b):
    batch = _matrix_shape(b, False)[:-2]
    if batch == _ct_batch(ct, a, b):
        return _reshape(matmul_p.bind(_mT(_as_matrix(a, left=True)), _matmul_ct(ct, a, b)), b.shape)
    ct2 = _matmul_ct(ct, a, b)
    if math.prod(batch) == 1:  # NOTE: a matrix times batched `a`: the batch dims fold into the contraction
        rows = math.prod(ct2.shape[:-1])
        a2, ct2 = _reshape(a, (rows, a.shape[-1])), _reshape(ct2, (rows, ct2.shape[-1]))
        return _reshape(matmul_p.bind(_mT(a2), ct2), b.shape)
    return _matmul_transpose_summed(ct2, a, b, 1)


deflinear2_transpose(matmul_p, _matmul_transpose_a, _matmul_transpose_b)


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
    if _state.autocast is not None:  # NOTE: inside `aotjax.autocast`: in its dtype (`autocast.lower`)
        return _matmul_autocast(a, b)
    if (type(a) is type(b) is Tensor and not a._chain and not b._chain and a._strides is None
            and b._strides is None and not _transforms[0] and a._storage.grad_node is None
            and b._storage.grad_node is None):  # NOTE: the eager fast path (`apply_plain`)
        x, y = a._storage.base, b._storage.base
        if x.dtype == y.dtype:
            out = apply_plain(matmul_p, x, y)
            if out is not None:
                return out
    elif ((type(a) is RecordingTensor or type(b) is RecordingTensor) and not _transforms[0] and fast_operand(a)
          and fast_operand(b) and a.dtype == b.dtype):  # NOTE: an operand requires grad: the recording fast path
        out = apply_recording(matmul_p, (a, b), (a._storage.base, b._storage.base))
        if out is not None:
            return out
    a, b = as_tensor(a), as_tensor(b)
    _same_dtype("matmul", a, b)
    return matmul_p.bind(a, b)


_matmul_autocast = autocast.lower(matmul)


@autocast.lower
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


@autocast.lower
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
def _einsum_flops(in_avals, out_avals, *, equation) -> float:
    # NOTE: evaluated naively: at each point of the index space, one multiply per extra operand and an add
    _, _, size, _ = _einsum_labels(equation, [a.shape for a in in_avals])
    return float(len(in_avals) * math.prod(size.values()))


einsum_p = standard_primitive("einsum", None, None, lambda *xs, equation: jnp.einsum(equation, *xs),
                              recompute=Recompute.EXPENSIVE, flops=_einsum_flops, is_dot=True,
                              linear=True)  # in each operand, the others fixed: see `_einsum_transpose`


def _einsum_jvp(primals, tangents, *, equation):
    out = einsum_p.bind(*primals, equation=equation)
    terms = [einsum_p.bind(*primals[:i], t, *primals[i + 1:], equation=equation)
             for i, t in enumerate(tangents) if not isinstance(t, Zero)]
    return [out], [sum_tangents(out.aval, terms)]


jvp_rules[einsum_p] = _einsum_jvp


def _einsum_labels(equation: str, shapes) -> tuple[list[list[str]], list[str], dict[str, int], list[str]]:
    """The labels of each operand and of the output, explicitly: `...` spelled out with fresh labels, an
    implicit output made explicit (NumPy's rule) and a dim broadcast from size 1 given a label of its own.
    Also the size of each label and the unused labels left."""
    ins, arrow, out = equation.partition("->")
    free = [c for c in string.ascii_letters if c not in equation]
    n_ell = max((len(s) - len(t) + 3 for t, s in zip(ins.split(","), shapes) if "..." in t), default=0)
    ell, free = free[:n_ell], free[n_ell:]

    def spell(term: str, ndim: int) -> list[str]:
        head, dots, tail = term.partition("...")
        return list(head) + (ell[len(ell) - (ndim - len(head) - len(tail)):] if dots else []) + list(tail)

    terms = [spell(t, len(s)) for t, s in zip(ins.split(","), shapes)]
    size: dict[str, int] = {}
    for t, s in zip(terms, shapes):
        for label, n in zip(t, s):
            size[label] = n if size.get(label, 1) == 1 else size[label]  # NOTE: not max: a size 0 is no 1
    for t, s in zip(terms, shapes):
        for k, n in enumerate(s):
            if n != size[t[k]]:  # NOTE: size 1 broadcast against a larger size: a label of its own
                t[k], free = free[0], free[1:]
                size[t[k]] = 1
    if arrow:
        out_labels = spell(out, len(out) - 3 + n_ell if "..." in out else len(out))
    else:
        counts = [c for c in ins if c.isalpha()]
        out_labels = ell + sorted(c for c in set(counts) if counts.count(c) == 1)
    return terms, out_labels, size, free


def _einsum_transpose(ct, *xs, equation):
    """Operand i's cotangent is the einsum of the output cotangent with the other operands, producing
    operand i's labels; a label repeated in it (a diagonal) is tied to a fresh one by an identity matrix,
    a label found nowhere else (summed over in operand i alone) is broadcast by a vector of ones."""
    i = linear_operand(einsum_p, xs)
    terms, out_labels, size, free = _einsum_labels(equation, [x.shape for x in xs])
    operands = [ct, *(x for j, x in enumerate(xs) if j != i)]
    in_terms = [out_labels, *(t for j, t in enumerate(terms) if j != i)]
    seen = {label for t in in_terms for label in t}
    target: list[str] = []
    for label in terms[i]:
        if label not in seen:
            operands.append(ones(size[label], dtype=ct.dtype))
            in_terms.append([label])
            seen.add(label)
        if label in target:
            fresh, free = free[0], free[1:]
            operands.append(eye(size[label], dtype=ct.dtype))
            in_terms.append([label, fresh])
            label = fresh
        target.append(label)
    spec = ",".join("".join(t) for t in in_terms) + "->" + "".join(target)
    return [einsum_p.bind(*operands, equation=spec) if j == i else None for j in range(len(xs))]


transpose_rules[einsum_p] = _einsum_transpose


@autocast.lower
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


def _linear_node(x, weight, bias=None) -> str:
    """torch's node of `linear`: a matrix input is one `addmm` (or `mm`), a batch of them is folded into one and
    viewed back."""
    if getattr(x, "ndim", 0) == 2:
        return "MmBackward0" if bias is None else "AddmmBackward0"
    return "UnsafeViewBackward0" if bias is None else "ViewBackward0"


@autocast.lower
@fused_when_eager(_linear_node)
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


# -- Tensor methods and operators ----------------------------------------------------------------
for _op in (matmul, mm, bmm, dot, outer):
    method(_op)
method(matmul, "__matmul__")
method(reflected(matmul), "__rmatmul__")


def _einsum_batch(axis_size, vals, bdims, *, equation):
    """One `einsum` with a fresh label for the batch axis: in each batched operand's term at its batch axis, and
    first in the output's."""
    examples = [_example_aval(v, d).shape for v, d in zip(vals, bdims)]
    terms, out_labels, _, free = _einsum_labels(equation, examples)
    label = free[0]
    for t, d in zip(terms, bdims):
        if d is not not_mapped:
            t.insert(d, label)
    batched = ",".join("".join(t) for t in terms) + "->" + label + "".join(out_labels)
    return [einsum_p.bind(*vals, equation=batched)], [0]


batching_rules[einsum_p] = _einsum_batch
