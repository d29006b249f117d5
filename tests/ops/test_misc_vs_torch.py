"""Short compositions of several families (`logical_xor ldexp positive` in aotjax/ops/math/functions.py, the trapezoid
rule and `histogram` in reduce/statistics.py, torch's older linear algebra in linalg/lapack.py, the `*_copy` forms
in shape/arrangement.py, ...) against PyTorch: values and dtype kinds eagerly, the in-place forms,
the `*_copy` forms (new contiguous tensors), one compiled program and one vjp against torch's autograd, and
torch's errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax
from aotjax.core.errors import DTypeError, ShapeError
from tests.helpers import FLOAT, X64
from tests.op_records import as_np

TOL = 1e-9 if X64 else 1e-5
RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(FLOAT)
B = RNG.standard_normal((3, 4)).astype(FLOAT)
XS = np.array([0.0, 0.5, 1.5, 3.0], FLOAT)
IDX = np.array([[0, 5], [-1, 11]], np.int32)
SPD = (A[:, :3] @ A[:, :3].T + np.eye(3)).astype(FLOAT)
L = np.linalg.cholesky(SPD).astype(FLOAT)

# name -> (arguments, as numpy arrays or Python values, keyword arguments); the same call on torch and aotjax.
CASES = {
    "logical_xor": [((A, np.array([0, 3, 0, 1], np.int32)), {})],
    "true_divide": [((A, B), {}), ((np.array([3, 4], np.int32), 2), {})],
    "ldexp": [((A, np.array([1, -2, 0, 3], np.int32)), {})],
    "positive": [((A,), {})],
    "trapezoid": [((A, XS), {}), ((A,), dict(dx=0.5, dim=0)), ((np.array([[1], [2], [4]], np.int32),), {})],
    "trapz": [((A, XS), {})],
    "cumulative_trapezoid": [((A, B), dict(dim=0))],
    # gradient: sample points with edge_order=1 in its doctest (torch's output)
    "gradient": [((A,), {}), ((A,), dict(spacing=2.0, dim=1, edge_order=2)),
                 ((A,), dict(spacing=[XS[:3]], dim=-2, edge_order=2))],
    "histogram": [((A, 5), {}), ((A, np.array([-2.0, -0.5, 0.0, 1.0, 3.0], FLOAT)), dict(weight=np.abs(A))),
                  ((A, 4), dict(range=(-1.0, 1.0), density=True)), ((np.ones(2, FLOAT), 2), {})],
    "renorm": [((A, 2, 0, 1.0), {}), ((A, float("inf"), -1, 0.7), {})],
    "unravel_index": [((IDX, (3, 4)), {})],
    "scalar_tensor": [((3,), {}), ((2.5,), dict(dtype="int"))],
    "constant_pad_nd": [((A, (1, 2, 0, 1), 7.0), {})],
    "pinverse": [((A,), {})],
    "unsafe_chunk": [((A, 3, 1), {})],
    "unsafe_split": [((A, 2), {})],
    "t_copy": [((A,), {})],
    "transpose_copy": [((A, 0, 1), {})],
    "permute_copy": [((A, (1, 0)), {})],
    "diagonal_copy": [((A,), dict(offset=1))],
    "expand_copy": [((A[:1], (3, 4)), {})],
    "squeeze_copy": [((A[:1],), {})],
    "unsqueeze_copy": [((A, 1), {})],
    "view_copy": [((A, (4, 3)), {})],
    "unbind_copy": [((A,), dict(dim=1))],
    "unfold_copy": [((A, 1, 2, 1), {})],
    "split_with_sizes_copy": [((A, [1, 3], 1), {})],
    "alias_copy": [((A,), {})],
    # nonzero_static: its doctest's output is torch's (an eager nonzero costs seconds to compile here)
    "cholesky": [((SPD,), dict(upper=True))],
    "cholesky_solve": [((B[:, :2], L), {}), ((B[:, :2], L.T.copy()), dict(upper=True))],
    "cholesky_inverse": [((L,), {})],
    "qr": [((A.T.copy(),), dict(some=False))],
    "lu": [((SPD,), {})],
    "triangular_solve": [((B[:, :2], L), dict(upper=False)), ((B[:, :2], L.T.copy()), dict(transpose=True))],
}
DTYPES = {"int": (aotjax.int32, torch.int32)}


def _convert(arg, lib):
    if isinstance(arg, list):  # gradient's sample points, one tensor per dim
        return [_convert(a, lib) for a in arg]
    if isinstance(arg, np.ndarray):
        return torch.tensor(arg) if lib is torch else aotjax.tensor(arg)
    return arg


def _check(got, want, strides=False):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        return [_check(g, w, strides) for g, w in zip(got, want)]
    want_np = want.numpy()
    got_np = as_np(got)
    assert got_np.shape == want_np.shape, (got_np.shape, want_np.shape)
    assert got_np.dtype.kind == want_np.dtype.kind, (got.dtype, want.dtype)
    np.testing.assert_allclose(got_np, want_np, rtol=TOL, atol=TOL)
    if strides and want.ndim:  # the strides torch gives its result
        assert got.stride() == want.stride(), (got.stride(), want.stride())


# Ops made of many small ops run their cases as one compiled program (one XLA compile instead of one per op and
# shape eagerly; their doctests run them eagerly).
JITTED = {"gradient", "histogram", "renorm", "trapezoid", "unravel_index"}


def _traced_args(cases):
    """The cases with each array replaced by an `_Arg` slot, and the arrays: a jitted function takes the arrays."""
    arrays = []

    def slot(a):
        if isinstance(a, list):
            return [slot(b) for b in a]
        if isinstance(a, np.ndarray):
            arrays.append(a)
            return _Arg(len(arrays) - 1)
        return a
    return [([slot(a) for a in args], {k: slot(v) for k, v in kw.items()}) for args, kw in cases], arrays


class _Arg(int):
    pass


def _fill(a, tensors):
    if isinstance(a, list):
        return [_fill(b, tensors) for b in a]
    return tensors[a] if isinstance(a, _Arg) else DTYPES[a][0] if a in DTYPES else a


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's deprecation of its older linalg functions
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    op = getattr(aotjax, name)
    want = []
    for args, kwargs in CASES[name]:
        kw_t = {k: DTYPES[v][1] if k == "dtype" else _convert(v, torch) for k, v in kwargs.items()}
        want.append(getattr(torch, name)(*[_convert(a, torch) for a in args], **kw_t))
    slotted, arrays = _traced_args(CASES[name])
    run = lambda *ts: [op(*_fill(args, ts), **{k: _fill(v, ts) for k, v in kw.items()}) for args, kw in slotted]
    got = (aotjax.jit(run) if name in JITTED else run)(*[aotjax.tensor(a) for a in arrays])
    _check(got, want, strides=name.endswith("_copy"))  # LAPACK's results are column-major in torch


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_svd_and_lu_solve_as_torch():
    x, y = aotjax.tensor(A), torch.tensor(A)
    for some in (True, False):
        U, S, V = aotjax.svd(x, some=some)
        Ut, St, Vt = torch.svd(y, some=some)
        assert (U.shape, S.shape, V.shape) == (Ut.shape, St.shape, Vt.shape)
        k = S.shape[-1]  # singular vectors are unique up to sign: compare the reconstruction
        np.testing.assert_allclose(as_np(U[:, :k] * S @ V[:, :k].T), A, rtol=TOL * 10, atol=TOL * 10)
        _check(S, St)
    _check(aotjax.svd(x, compute_uv=False), torch.svd(y, compute_uv=False))
    LU, pivots = aotjax.lu(aotjax.tensor(SPD))
    _check(aotjax.lu_solve(aotjax.tensor(B[:, :2]), LU, pivots),
           torch.lu_solve(torch.tensor(B[:, :2]), *torch.linalg.lu_factor(torch.tensor(SPD))))


def test_tensor_methods_and_inplace_forms():
    x, y = aotjax.tensor(A), torch.tensor(A)
    _check(x.sum_to_size(1, 4), y.sum_to_size(1, 4))
    _check(x.sum_to_size((4,)), y.sum_to_size((4,)))
    assert aotjax.Tensor.renorm is aotjax.renorm and aotjax.Tensor.pinverse is aotjax.pinverse
    assert aotjax.positive(x) is x and x.positive() is x
    for name, other in [("logical_xor_", B), ("ldexp_", np.array([1, 0, -1, 2], np.int32)), ("true_divide_", B),
                        ("renorm_", None)]:
        x, y = aotjax.tensor(A), torch.tensor(A)
        view_x, view_y = x[1:], y[1:]  # written through a view: the base sees it
        other = None if other is None else other[-view_x.shape[-2]:] if other.ndim == 2 else other
        assert getattr(view_x, name)(*((2, 0, 0.5) if other is None else (_convert(other, aotjax),))) is view_x
        getattr(view_y, name)(*((2, 0, 0.5) if other is None else (_convert(other, torch),)))
        _check(x, y)


def test_copy_forms_share_nothing():
    x = aotjax.tensor(A)
    for out in (aotjax.t_copy(x), aotjax.diagonal_copy(x), aotjax.expand_copy(x[:1], (2, 4)),
                *aotjax.unbind_copy(x)):
        out.fill_(0.0)
    np.testing.assert_array_equal(as_np(x), A)


def test_compiled_differentiated_and_batched_like_torch():
    def f(lib, y, xs, w):
        area = lib.trapezoid(y * w, xs) + lib.cumulative_trapezoid(y, dim=0).sum()
        return (lib.renorm(y, 2, 0, 1.0) * lib.ldexp(w, lib.tensor([1, 0, 2, 1]))).sum() + area.sum()

    def g(y, xs, w):  # one compiled program: f, its gradient, and f's parts under vmap
        rows = aotjax.vmap(lambda r: aotjax.trapezoid(r, xs) + aotjax.renorm(r[None], 2, 0, 1.0).sum())(y)
        return f(aotjax, y, xs, w), rows

    args = [A, XS, B]
    step = aotjax.jit(aotjax.value_and_grad(g, argnums=(0, 1, 2), has_aux=True))
    (value, rows), grads = step(*[aotjax.tensor(a) for a in args])
    want_args = [torch.tensor(a, requires_grad=True) for a in args]
    want = f(torch, *want_args)
    np.testing.assert_allclose(as_np(value), want.detach().numpy(), rtol=1e-4)
    for got, t in zip(grads, torch.autograd.grad(want, want_args)):
        np.testing.assert_allclose(as_np(got), t.numpy(), rtol=1e-4, atol=1e-5)
    rows_t = torch.tensor(A)
    want_rows = [torch.trapezoid(r, torch.tensor(XS)) + torch.renorm(r[None], 2, 0, 1.0).sum() for r in rows_t]
    np.testing.assert_allclose(as_np(rows), np.stack([w.numpy() for w in want_rows]), rtol=1e-5, atol=1e-6)


def test_errors_as_torch():
    with pytest.raises(DTypeError, match="positive: not supported for bool"):
        aotjax.positive(aotjax.tensor([True]))
    with pytest.raises(ShapeError, match="renorm: expected a tensor of at least 2 dims"):
        aotjax.renorm(aotjax.tensor([1.0, 2.0]), 2, 0, 1.0)
    with pytest.raises(DTypeError, match="renorm: expected a floating-point"):
        aotjax.renorm(aotjax.tensor([[1, 2]]), 2, 0, 1.0)
    with pytest.raises(ShapeError, match="sum_to_size: size .* is not expandable"):
        aotjax.ones(2, 3).sum_to_size(2)
    with pytest.raises(DTypeError, match="unravel_index: expected integer indices"):
        aotjax.unravel_index(aotjax.tensor([1.0]), (2, 2))
    with pytest.raises(ShapeError, match="gradient: dim 0 has 2 points; edge_order=2 needs at least 3"):
        aotjax.gradient(aotjax.ones(2, 3), edge_order=2)
    with pytest.raises(ValueError, match="gradient: expected one spacing per dim"):
        aotjax.gradient(aotjax.ones(2, 3), spacing=[1.0])
    with pytest.raises(DTypeError, match="histogram: expected a floating-point tensor"):
        aotjax.histogram(aotjax.tensor([1, 2]), 2)
    with pytest.raises(ShapeError, match="trapezoid: x has 3 points but y has 4"):
        aotjax.trapezoid(aotjax.tensor(A), aotjax.tensor([0.0, 1.0, 2.0]))
