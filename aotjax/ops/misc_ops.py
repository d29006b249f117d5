"""PyTorch ops that are short compositions of other ops: `logical_xor`, `true_divide`, `ldexp`, `positive`, the
trapezoid rule (`trapezoid trapz cumulative_trapezoid`), `renorm`, `sum_to_size`, `unravel_index`, `scalar_tensor`,
`constant_pad_nd`, `pinverse`, `unsafe_chunk`/`unsafe_split`, and the `*_copy` forms of the views (`t_copy`,
`diagonal_copy`, ...: the view's values in a new contiguous tensor). No primitive of their own: every rule (jvp,
transpose, batching) is that of the ops they are made of.

>>> aotjax.trapezoid(aotjax.tensor([1.0, 2.0, 3.0]))
tensor(4.)
"""
from __future__ import annotations

from typing import NamedTuple

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.source_info import where
from aotjax.ops import creation, decompositions, indexing, resampling, sorting, views
from aotjax.ops._frontend import as_tensor, canonical_dim
from aotjax.ops.arrangement import split_with_sizes
from aotjax.ops.elementwise import add, div, div_, floor_divide, mul, ne, pow, remainder
from aotjax.ops.elementwise import where as where_
from aotjax.ops.pointwise import _alias, _inplace_of
from aotjax.ops.promotion import default_float_dtype, default_int_dtype, is_float
from aotjax.ops.reduction import cumsum, sum
from aotjax.ops.shape import cat, clone
from aotjax.ops.statistics import diff, norm
from aotjax.tensor import Tensor, method

__all__ = ["logical_xor", "logical_xor_", "true_divide", "true_divide_", "ldexp", "ldexp_", "positive", "trapezoid",
           "trapz", "cumulative_trapezoid", "gradient", "histogram", "HistogramResult", "renorm", "renorm_",
           "unravel_index", "scalar_tensor", "constant_pad_nd", "pinverse", "unsafe_chunk", "unsafe_split",
           "nonzero_static", "cholesky", "cholesky_solve", "cholesky_inverse", "qr", "svd", "SvdResult", "lu",
           "lu_solve", "triangular_solve", "TriangularSolveResult"]


def logical_xor(x, other):
    """Whether exactly one of `x`, `other` is nonzero (bool).

    >>> aotjax.logical_xor(aotjax.tensor([0.0, 1.0, 2.0]), aotjax.tensor([1, 1, 0]))
    tensor([ True, False,  True])
    """
    return ne(ne(as_tensor(x), 0), ne(as_tensor(other), 0))


def ldexp(x, other):
    """`x * 2 ** other` (a float result).

    >>> aotjax.ldexp(aotjax.tensor([1.0, 3.0]), aotjax.tensor([2, -1]))
    tensor([4. , 1.5])
    """
    return mul(x, pow(2.0, as_tensor(other)))


def positive(x):
    """`x` itself (`+x`); PyTorch refuses bool tensors.

    >>> x = aotjax.tensor([1.0, -2.0])
    >>> aotjax.positive(x) is x
    True
    """
    if as_tensor(x).dtype == bool:
        raise DTypeError(f"positive: not supported for bool tensors{where()}; use x itself, or x.int()")
    return x


logical_xor_ = _inplace_of(logical_xor, "logical_xor_", "aotjax.tensor([1.0, 1.0, 0.0])")
ldexp_ = _inplace_of(ldexp, "ldexp_", "aotjax.tensor([1, 0, 2])")
true_divide = _alias(div, "true_divide")
true_divide_ = _alias(div_, "true_divide_")


# -- the trapezoid rule ---------------------------------------------------------------------------------------------
def _trapezoids(y, x, dx, dim: int):
    """The area of each trapezoid along `dim`: (y[i] + y[i+1]) / 2 * (x[i+1] - x[i]) (or `dx`)."""
    y = as_tensor(y)
    d = canonical_dim(dim, y.ndim, "trapezoid")
    n = max(y.shape[d] - 1, 0)
    mid = div(add(views.narrow(y, d, 0, n), views.narrow(y, d, min(1, y.shape[d]), n)), 2)
    if x is None:
        return mul(mid, 1 if dx is None else dx)
    x = as_tensor(x)
    if x.ndim == 1:  # spacing along `dim`, broadcast over the other dims
        if x.shape[0] != y.shape[d]:
            raise ShapeError(f"trapezoid: x has {x.shape[0]} points but y has {y.shape[d]} along dim {dim}{where()}")
        x = views.view(x, *[-1 if i == d else 1 for i in range(y.ndim)])
    steps = add(views.narrow(x, d, min(1, x.shape[d]), n), views.narrow(x, d, 0, n), alpha=-1)
    return mul(mid, steps)


def trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The integral of `y` along `dim` by the trapezoid rule, with sample points `x` (1-D, or `y`'s shape) or a
    constant spacing `dx` (default 1).

    >>> aotjax.trapezoid(aotjax.tensor([1.0, 2.0, 3.0]), aotjax.tensor([0.0, 1.0, 3.0]))
    tensor(6.5)
    """
    return sum(_trapezoids(y, x, dx, dim), dim)


def trapz(y, x=None, *, dx=None, dim: int = -1):
    """`trapezoid` (NumPy's older name).

    >>> aotjax.trapz(aotjax.tensor([1.0, 2.0, 3.0]), dx=2.0)
    tensor(8.)
    """
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The running integral of `y` along `dim` by the trapezoid rule (one element fewer than `y` along `dim`).

    >>> aotjax.cumulative_trapezoid(aotjax.tensor([1.0, 2.0, 3.0]))
    tensor([1.5, 4. ])
    """
    return cumsum(_trapezoids(y, x, dx, dim), dim)


def _gradient_along(f, d: int, x, edge_order: int):
    """The derivative of `f` along dim `d` by finite differences at sample points `x` (a 1-D tensor) or spacing `x` (a
    number): second order in the interior, `edge_order` at the two ends (NumPy's and PyTorch's formulas)."""
    n = f.shape[d]
    if n < edge_order + 1:
        raise ShapeError(f"gradient: dim {d} has {n} points; edge_order={edge_order} needs at least {edge_order + 1}"
                         f"{where()}")
    part = lambda start, length: views.narrow(f, d, start, length)
    if isinstance(x, Tensor):
        steps = views.view(diff(x), *[-1 if i == d else 1 for i in range(f.ndim)])
        h = lambda i: views.narrow(steps, d, i % (n - 1), 1)  # x[i+1] - x[i], i from either end
        left, right = views.narrow(steps, d, 0, n - 2), views.narrow(steps, d, 1, n - 2)
    else:
        h = lambda i: x
        left = right = x
    inner = div(add(add(mul(part(2, n - 2), left * left), mul(part(0, n - 2), right * right), alpha=-1),
                    mul(part(1, n - 2), right * right - left * left)), left * right * (left + right))
    if edge_order == 1:
        first = div(add(part(1, 1), part(0, 1), alpha=-1), h(0))
        last = div(add(part(n - 1, 1), part(n - 2, 1), alpha=-1), h(-1))
    else:
        h1, h2 = h(0), h(1)
        first = (-(2 * h1 + h2) / (h1 * (h1 + h2)) * part(0, 1) + (h1 + h2) / (h1 * h2) * part(1, 1)
                 - h1 / (h2 * (h1 + h2)) * part(2, 1))
        h1, h2 = h(-2), h(-1)
        last = (h2 / (h1 * (h1 + h2)) * part(n - 3, 1) - (h1 + h2) / (h1 * h2) * part(n - 2, 1)
                + (2 * h2 + h1) / (h2 * (h1 + h2)) * part(n - 1, 1))
    return cat([first, inner, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order: int = 1):
    """The derivative of `input` along each of `dim` (default: every dim) by finite differences, as a tuple of
    tensors: central differences inside, one-sided (`edge_order` 1 or 2) at the ends. `spacing` is one number for
    every dim, a number per dim, or a 1-D tensor of sample points per dim.

    >>> aotjax.gradient(aotjax.tensor([1.0, 2.0, 4.0, 8.0]))
    (tensor([1. , 1.5, 3. , 4. ]),)
    >>> aotjax.gradient(aotjax.tensor([1.0, 2.0, 4.0, 8.0]), spacing=[aotjax.tensor([0.0, 1.0, 1.5, 3.5])])
    (tensor([1. , 3. , 3.6, 2. ]),)
    """
    f = as_tensor(input)
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order}{where()}")
    dims = tuple(range(f.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(canonical_dim(d, f.ndim, "gradient") for d in dims)
    spacings = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(spacings) != len(dims):
        raise ValueError(f"gradient: expected one spacing per dim ({len(dims)}), got {len(spacings)}{where()}")
    if not is_float(f.dtype):
        f = f.to(default_float_dtype())
    return tuple(_gradient_along(f, d, as_tensor(x) if isinstance(x, Tensor) else x, edge_order)
                 for d, x in zip(dims, spacings))


class HistogramResult(NamedTuple):
    """`histogram`'s result: the count (or weight, or density) in each bin, and the bins' edges."""
    hist: Tensor
    bin_edges: Tensor


def _edges(lo, hi, steps: int):
    """`steps` evenly spaced edges from `lo` to `hi` (numbers or 0-d tensors), computed as PyTorch's `linspace` does
    (from the start up to half way, from the end after): PyTorch's edges, to within a rounding."""
    k = creation.arange(steps)
    step = (hi - lo) / (steps - 1)
    return where_(k < steps // 2, lo + k * step, hi - (steps - 1 - k) * step)


def histogram(input, bins, *, range=None, weight=None, density: bool = False) -> HistogramResult:
    """A histogram of `input`'s elements: `bins` equal bins over `range` (default: the data's min and max, widened
    by 0.5 each way when they are equal), or the bins between the edges of a 1-D tensor `bins`. Each bin holds its
    left edge, the last one its right edge too; elements outside are not counted. `weight` (`input`'s shape) counts
    each element by its weight; `density` divides by the total and the bin widths. Float tensors only, as PyTorch.
    A NaN among the data without `range` gives NaN edges (PyTorch raises).

    >>> aotjax.histogram(aotjax.tensor([0.0, 1.0, 1.0, 3.0]), 3)
    HistogramResult(hist=tensor([1., 2., 1.]), bin_edges=tensor([0., 1., 2., 3.]))
    """
    x = as_tensor(input)
    if not is_float(x.dtype):
        raise DTypeError(f"histogram: expected a floating-point tensor, got {x.aval.str_short()}{where()}; convert "
                         f"it with .float()")
    flat = views.reshape(x, -1)
    if isinstance(bins, Tensor):
        edges = as_tensor(bins).to(x.dtype)
    else:
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif flat.shape[0] == 0:
            lo, hi = 0.0, 1.0
        else:
            lo, hi = flat.min(), flat.max()
        if isinstance(lo, float):
            lo, hi = (lo - 0.5, hi + 0.5) if lo == hi else (lo, hi)
        else:
            same = lo == hi
            lo, hi = where_(same, lo - 0.5, lo), where_(same, hi + 0.5, hi)
        edges = _edges(lo, hi, int(bins) + 1).to(x.dtype)
    n = edges.shape[0] - 1
    last = views.select(edges, 0, n)
    index = add(sorting.searchsorted(edges, flat, right=True), -1)
    index = where_(flat == last, n - 1, index)
    inside = (flat >= views.select(edges, 0, 0)) & (flat <= last)
    weights = creation.ones_like(flat) if weight is None else views.reshape(as_tensor(weight).to(x.dtype), -1)
    hist = indexing.index_add(creation.zeros(n, dtype=x.dtype), 0, where_(inside, index, 0), where_(inside, weights, 0))
    if density:
        hist = div(hist, mul(sum(hist), diff(edges)))
    return HistogramResult(hist, edges)


# -- reductions and shapes ------------------------------------------------------------------------------------------
def renorm(x, p, dim: int, maxnorm):
    """`x` with each slice along `dim` whose `p`-norm exceeds `maxnorm` scaled down to norm `maxnorm`.

    >>> aotjax.renorm(aotjax.tensor([[3.0, 4.0], [0.3, 0.4]]), 2, 0, 1.0)
    tensor([[0.6, 0.8],
            [0.3, 0.4]])
    """
    x = as_tensor(x)
    if not is_float(x.dtype):
        raise DTypeError(f"renorm: expected a floating-point tensor, got {x.aval.str_short()}{where()}")
    if x.ndim < 2:
        raise ShapeError(f"renorm: expected a tensor of at least 2 dims, got {x.aval.str_short()}{where()}")
    d = canonical_dim(dim, x.ndim, "renorm")
    norms = norm(x, p, dim=tuple(i for i in range(x.ndim) if i != d), keepdim=True)
    # NOTE: PyTorch's factor, with its 1e-7 guard, so that results match to the last bit.
    return mul(x, where_(norms > maxnorm, div(maxnorm, add(norms, 1e-7)), 1.0))


renorm_ = _inplace_of(renorm, "renorm_")
renorm_.__doc__ = """In-place `renorm`: writes the result into `x` (through any view, into its base) and returns `x`.

    >>> x = aotjax.tensor([[3.0, 4.0]])
    >>> x.renorm_(2, 0, 1.0) is x, [round(v, 4) for v in x[0].tolist()]
    (True, [0.6, 0.8])
    """


def _sum_to_size(x, *size):
    """`x` summed down to `size` (which `x` must broadcast from): PyTorch's reduction of a broadcast gradient.

    >>> aotjax.ones(2, 3).sum_to_size(1, 3)
    tensor([[2., 2., 2.]])
    """
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    extra = x.ndim - len(size)
    if extra < 0 or any(s not in (1, n) for s, n in zip(size, x.shape[extra:])):
        raise ShapeError(f"sum_to_size: size {tuple(size)} is not expandable to the tensor's shape {x.shape}{where()}")
    out = sum(x, tuple(range(extra))) if extra else x
    dims = tuple(i for i, (s, n) in enumerate(zip(size, out.shape)) if s == 1 and n != 1)
    return sum(out, dims, keepdim=True) if dims else out


method(_sum_to_size, "sum_to_size")


def unravel_index(indices, shape):
    """The coordinates in an array of `shape` of each flat index of `indices`, as a tuple of tensors (one per dim of
    `shape`); negative indices count from the end.

    >>> [t.tolist() for t in aotjax.unravel_index(aotjax.tensor([4, 1, -1]), (2, 3))]
    [[1, 0, 1], [1, 1, 2]]
    """
    indices = as_tensor(indices)
    if is_float(indices.dtype) or indices.dtype == bool:
        raise DTypeError(f"unravel_index: expected integer indices, got {indices.aval.str_short()}{where()}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    numel = strides[0] * shape[0] if shape else 1
    flat = where_(indices < 0, add(indices, numel), indices).to(default_int_dtype())
    # NOTE: one division and one remainder for every dim at once, then the coordinates as views of that result
    # (as PyTorch returns them).
    coords = remainder(floor_divide(flat.unsqueeze(-1), creation.tensor(strides)), creation.tensor(list(shape)))
    return views.unbind(coords, -1)


def scalar_tensor(s, *, dtype=None, device=None):
    """A 0-d tensor holding `s`, of the default float dtype unless `dtype` says otherwise (as PyTorch; `device` is
    accepted for compatibility).

    >>> aotjax.scalar_tensor(3)
    tensor(3.)
    """
    return creation.tensor(s, dtype=dtype or default_float_dtype())


def constant_pad_nd(input, pad, value=0):
    """`input` padded with `value` (`torch.nn.functional.pad` with `mode='constant'`; negative sizes crop).

    >>> aotjax.constant_pad_nd(aotjax.tensor([1.0, 2.0]), (1, 0), 9.0)
    tensor([9., 1., 2.])
    """
    return resampling.pad(input, pad, "constant", value)


def pinverse(x, rcond: float = 1e-15):
    """The Moore-Penrose pseudo-inverse, singular values below `rcond` times the largest set to zero
    (`torch.pinverse`; `aotjax.linalg.pinv` is the newer form).

    >>> aotjax.pinverse(aotjax.tensor([[2.0, 0.0], [0.0, 0.0]]))
    tensor([[0.5, 0. ],
            [0. , 0. ]])
    """
    return decompositions.pinv(x, rtol=rcond)


def unsafe_chunk(x, chunks: int, dim: int = 0):
    """`chunk` (PyTorch's form that skips autograd's version checks; the same views here).

    >>> [c.tolist() for c in aotjax.unsafe_chunk(aotjax.tensor([1, 2, 3]), 2)]
    [[1, 2], [3]]
    """
    return views.chunk(x, chunks, dim)


def unsafe_split(x, split_size, dim: int = 0):
    """`split` (PyTorch's form that skips autograd's version checks; the same views here).

    >>> [c.tolist() for c in aotjax.unsafe_split(aotjax.tensor([1, 2, 3]), 2)]
    [[1, 2], [3]]
    """
    return views.split(x, split_size, dim)


def nonzero_static(x, *, size: int, fill_value: int = -1):
    """The indices of `x`'s nonzero elements, exactly `size` rows (cut, or padded with `fill_value`): `nonzero`
    with a static shape, so it traces.

    >>> aotjax.nonzero_static(aotjax.tensor([0.0, 2.0, 3.0]), size=3).tolist()
    [[1], [2], [-1]]
    """
    return indexing.nonzero(x, size=size, fill_value=fill_value)


# -- torch's older linear-algebra functions, through aotjax.linalg ---------------------------------------------------
def cholesky(A, upper: bool = False):
    """The Cholesky factor of `A` (`torch.cholesky`; `aotjax.linalg.cholesky` is the newer form).

    >>> aotjax.cholesky(aotjax.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    return decompositions.cholesky(A, upper=upper)


def cholesky_solve(B, L, upper: bool = False):
    """`X` solving `A X = B` for `A = L L^H` (or `U^H U` when `upper`), from `A`'s Cholesky factor.

    >>> aotjax.cholesky_solve(aotjax.tensor([[4.0], [8.0]]), aotjax.tensor([[2.0, 0.0], [0.0, 2.0]])).tolist()
    [[1.0], [2.0]]
    """
    lower = views.transpose(L, -2, -1) if upper else L
    y = decompositions.solve_triangular(lower, B, upper=False)
    return decompositions.solve_triangular(views.transpose(lower, -2, -1), y, upper=True)


def cholesky_inverse(L, upper: bool = False):
    """The inverse of `A = L L^H` (or `U^H U` when `upper`) from its Cholesky factor.

    >>> aotjax.cholesky_inverse(aotjax.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.25, 0.0], [0.0, 0.0625]]
    """
    L = as_tensor(L)
    eye = creation.eye(L.shape[-1], dtype=L.dtype).expand(L.shape)
    return cholesky_solve(eye, L, upper)


def qr(A, some: bool = True):
    """`A = Q R` (`torch.qr`): the reduced factorization, or the complete one when `some=False`.

    >>> Q, R = aotjax.qr(aotjax.tensor([[3.0, 0.0], [4.0, 1.0], [0.0, 2.0]]))
    >>> Q.shape, R.shape
    ((3, 2), (2, 2))
    """
    return decompositions.qr(A, "reduced" if some else "complete")


class SvdResult(NamedTuple):
    """`torch.svd`'s result: `A = U diag(S) V^H` (`V`, not `aotjax.linalg.svd`'s `Vh`)."""
    U: Tensor
    S: Tensor
    V: Tensor


def svd(A, some: bool = True, compute_uv: bool = True) -> SvdResult:
    """The singular value decomposition as `torch.svd` gives it: `(U, S, V)` with `A = U diag(S) V^T`; reduced
    unless `some=False`; with `compute_uv=False`, `U` and `V` are zeros (`(m, m)`, `(n, n)`) as in PyTorch.

    >>> aotjax.svd(aotjax.tensor([[3.0, 0.0], [0.0, -2.0]])).S
    tensor([3., 2.])
    """
    A = as_tensor(A)
    if not compute_uv:
        m, n = A.shape[-2:]
        S = decompositions.svdvals(A)
        return SvdResult(creation.zeros(*A.shape[:-2], m, m, dtype=A.dtype), S,
                         creation.zeros(*A.shape[:-2], n, n, dtype=A.dtype))
    U, S, Vh = decompositions.svd(A, full_matrices=not some)
    return SvdResult(U, S, views.transpose(Vh, -2, -1))


def lu(A, pivot: bool = True, get_infos: bool = False):
    """`(LU, pivots)` of `A` (`torch.lu`, that is `aotjax.linalg.lu_factor`), and zeros for `infos` when
    `get_infos` (aotjax does not report singular factors).

    >>> LU, pivots = aotjax.lu(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> pivots.tolist()
    [2, 2]
    """
    LU, pivots = decompositions.lu_factor(A, pivot=pivot)
    if get_infos:
        return LU, pivots, creation.zeros(*LU.shape[:-2], dtype=pivots.dtype)
    return LU, pivots


def lu_solve(b, LU_data, LU_pivots):
    """`X` solving `A X = b` from `A`'s LU factorization (`torch.lu_solve`; argument order as in PyTorch).

    >>> LU, pivots = aotjax.lu(aotjax.tensor([[2.0, 0.0], [0.0, 4.0]]))
    >>> aotjax.lu_solve(aotjax.tensor([[2.0], [4.0]]), LU, pivots).tolist()
    [[1.0], [1.0]]
    """
    return decompositions.lu_solve(LU_data, LU_pivots, b)


class TriangularSolveResult(NamedTuple):
    """`torch.triangular_solve`'s result: the solution and a copy of the triangular matrix."""
    solution: Tensor
    cloned_coefficient: Tensor


def triangular_solve(b, A, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> TriangularSolveResult:
    """`X` solving `A X = b` (or `A^T X = b` when `transpose`) for triangular `A` (`torch.triangular_solve`;
    `aotjax.linalg.solve_triangular` is the newer form, arguments reversed).

    >>> aotjax.triangular_solve(aotjax.tensor([[3.0], [4.0]]), aotjax.tensor([[1.0, 1.0], [0.0, 2.0]])).solution
    tensor([[1.],
            [2.]])
    """
    coefficient = views.transpose(A, -2, -1) if transpose else A
    X = decompositions.solve_triangular(coefficient, b, upper=upper != transpose, unitriangular=unitriangular)
    return TriangularSolveResult(X, clone(A))


for _fn in (histogram, logical_xor, logical_xor_, true_divide, true_divide_, ldexp, ldexp_, positive, renorm, renorm_,
            pinverse, unsafe_chunk, unsafe_split, nonzero_static, cholesky, cholesky_solve, cholesky_inverse, qr, svd,
            lu, lu_solve, triangular_solve):
    method(_fn)


# -- the *_copy forms of the views -------------------------------------------------------------------------------
def _copy_form(view_fn, name: str, example: str, expected: str):
    """`torch.<view>_copy`: the view's values in a new contiguous tensor (sequences of views: a tuple of them)."""
    def copy_op(x, *args, **kwargs):
        out = view_fn(x, *args, **kwargs)
        if isinstance(out, (tuple, list)):
            return tuple(clone(o, memory_format="contiguous") for o in out)
        return clone(out, memory_format="contiguous")
    copy_op.__name__ = copy_op.__qualname__ = name
    copy_op.__doc__ = (f"`{view_fn.__name__.lstrip('_')}` as a copy: the view's values in a new contiguous tensor "
                       f"that shares nothing with `x`.\n\n    >>> aotjax.{name}({example})\n    {expected}\n    ")
    return copy_op


_COPIES = {
    "alias_copy": (views.alias, "aotjax.tensor([1.0])", "tensor([1.])"),
    "t_copy": (views.t, "aotjax.tensor([[1, 2]])", "tensor([[1],\n            [2]])"),
    "transpose_copy": (views.transpose, "aotjax.tensor([[1, 2]]), 0, 1", "tensor([[1],\n            [2]])"),
    "permute_copy": (views.permute, "aotjax.tensor([[1, 2]]), (1, 0)", "tensor([[1],\n            [2]])"),
    "diagonal_copy": (views.diagonal, "aotjax.tensor([[1, 2], [3, 4]])", "tensor([1, 4])"),
    "expand_copy": (views.expand, "aotjax.tensor([1, 2]), (2, 2)", "tensor([[1, 2],\n            [1, 2]])"),
    "squeeze_copy": (views.squeeze, "aotjax.tensor([[1, 2]])", "tensor([1, 2])"),
    "unsqueeze_copy": (views.unsqueeze, "aotjax.tensor([1, 2]), 0", "tensor([[1, 2]])"),
    "view_copy": (views.view, "aotjax.tensor([1, 2]), 2, 1", "tensor([[1],\n            [2]])"),
    "unbind_copy": (views.unbind, "aotjax.tensor([[1, 2]])", "(tensor([1, 2]),)"),
    "unfold_copy": (Tensor.unfold, "aotjax.tensor([1, 2, 3]), 0, 2, 1", "tensor([[1, 2],\n            [2, 3]])"),
    "split_with_sizes_copy": (split_with_sizes, "aotjax.tensor([1, 2, 3]), [1, 2]", "(tensor([1]), tensor([2, 3]))"),
}
for _name, (_view, _example, _expected) in _COPIES.items():
    globals()[_name] = _copy_form(_view, _name, _example, _expected)
    __all__.append(_name)
