"""The arrangement ops (aotjax/ops/shape/arrangement.py, and flip's dims= keyword) against PyTorch: each op on a few
samples (0-d and empty inputs where torch allows them, float and int dtypes, keyword arguments) eagerly, under
`aotjax.jit` (one compiled function per op) and `aotjax.vjp` against torch's autograd; and which results alias
their input, seen by writing into the input after the op and into each result: a view shows the write, a copy
does not, exactly as in torch (but for writes through overlapping unfold windows, which raise here)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax
from aotjax.core.errors import AliasingError, ShapeError, UnsupportedError
from tests.helpers import FLOAT, INT, X64
from tests.op_records import as_np

TOL = 1e-9 if X64 else 1e-5


def _f(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(FLOAT)


def _i(*shape, seed=0):
    return np.random.default_rng(seed).integers(-5, 6, shape).astype(INT)


def _long(m, t):
    """An index tensor as each library wants it: torch's int64, aotjax's default int."""
    return t.long() if m is torch else t


# name: (fn(m, *tensors) with m the module, aotjax or torch; [sample input arrays]); the first sample is jitted
CASES = {
    "unflatten": (lambda m, x: m.unflatten(x, 1, (2, -1)), [[_f(3, 6)], [_i(2, 4)]]),
    "unflatten_method": (lambda m, x: x.unflatten(-1, (1, 2, 2)), [[_f(3, 4)]]),
    "ravel": (lambda m, x: m.ravel(x), [[_f(2, 3)], [_f()], [_i(0, 3)]]),
    "ravel_of_transposed": (lambda m, x: x.t().ravel(), [[_f(2, 3)]]),
    "repeat_interleave": (lambda m, x: m.repeat_interleave(x, 2, dim=1), [[_f(2, 3)], [_i(2, 0)]]),
    "repeat_interleave_flat": (lambda m, x: x.repeat_interleave(3), [[_f(2, 2)], [_f()]]),
    "repeat_interleave_counts": (
        lambda m, x, r: m.repeat_interleave(x, _long(m, r), dim=0, output_size=6),
        [[_f(3, 2), np.array([1, 0, 5], INT)]]),
    "repeat_interleave_counts_only": (lambda m, r: m.repeat_interleave(_long(m, r), output_size=4),
                                      [[np.array([2, 0, 2], INT)]]),
    "hstack": (lambda m, a, b: m.hstack([a, b]), [[_f(2, 3), _f(2, 1)], [_f(3), _f()]]),
    "vstack": (lambda m, a, b: m.vstack((a, b)), [[_f(3), _f(2, 3)], [_i(), _i(1)]]),
    "row_stack": (lambda m, a, b: m.row_stack((a, b)), [[_f(3), _f(3)]]),
    "dstack": (lambda m, a, b: m.dstack([a, b]), [[_f(2, 3), _f(2, 3, 2)], [_f(4), _f(4)]]),
    "column_stack": (lambda m, a, b, c: m.column_stack([a, b, c]), [[_f(3), _f(3, 2), _f(3)], [_f(), _f(1), _f()]]),
    "tensor_split_sections": (lambda m, x: m.tensor_split(x, 3, dim=1), [[_f(2, 7)], [_f(2, 2)]]),
    "tensor_split_indices": (lambda m, x: x.tensor_split([1, 6, 4, -1], dim=0), [[_f(5, 2)], [_i(3)]]),
    "split_with_sizes": (lambda m, x: x.split_with_sizes([1, 0, 3], dim=-1), [[_f(2, 4)]]),
    "hsplit": (lambda m, x: m.hsplit(x, 2), [[_f(3, 4)], [_f(6)]]),
    "hsplit_indices": (lambda m, x: x.hsplit([1, 3]), [[_f(2, 4)]]),
    "vsplit": (lambda m, x: m.vsplit(x, [2]), [[_f(3, 2)]]),
    "dsplit": (lambda m, x: x.dsplit(2), [[_f(1, 2, 4)]]),
    "broadcast_tensors": (lambda m, a, b, c: m.broadcast_tensors(a, b, c),
                          [[_f(2, 1), _f(3), _f()], [_i(0, 1), _i(2), _i(1)]]),
    "meshgrid_ij": (lambda m, a, b, c: m.meshgrid(a, b, c, indexing="ij"),
                    [[_f(2), _f(3), _f()], [_i(0), _i(2), _i(1)]]),
    "meshgrid_xy": (lambda m, a, b, c: m.meshgrid([a, b, c], indexing="xy"), [[_f(2), _f(3), _f(4)]]),
    "rot90": (lambda m, x: m.rot90(x), [[_f(2, 3)], [_i(2, 3, 2)]]),
    "rot90_k": (lambda m, x: x.rot90(3, [2, 0]), [[_f(2, 3, 4)]]),
    "rot90_twice": (lambda m, x: m.rot90(x, k=-2, dims=[1, 0]), [[_f(2, 3)]]),
    "rot90_none": (lambda m, x: m.rot90(x, 4), [[_f(2, 3)]]),
    "fliplr": (lambda m, x: m.fliplr(x), [[_f(2, 3, 2)]]),
    "flipud": (lambda m, x: x.flipud(), [[_f(3)], [_i(2, 2)]]),
    "flip_dims_keyword": (lambda m, x: m.flip(x, dims=[0, -1]), [[_f(2, 3)]]),
    "flip_method_dims_keyword": (lambda m, x: x.flip(dims=(1,)), [[_f(2, 3)]]),
    "diag_of_vector": (lambda m, x: m.diag(x, 1), [[_f(3)], [_i(2)], [_f(0)]]),
    "diag_of_matrix": (lambda m, x: x.diag(-1), [[_f(3, 4)], [_i(2, 2)]]),
    "diag_embed": (lambda m, x: m.diag_embed(x), [[_f(2, 3)], [_f(2)]]),
    "diag_embed_dims": (lambda m, x: x.diag_embed(offset=-1, dim1=0, dim2=2), [[_f(2, 3)], [_i(2, 3)]]),
    "diagflat": (lambda m, x: m.diagflat(x, offset=2), [[_f(2, 2)], [_f()]]),
    "block_diag": (lambda m, a, b, c, d: m.block_diag(a, b, c, d),
                   [[_f(2, 3), _f(), _f(2), _f(0, 2)], [_i(1, 1), _f(2, 1), _i(), _i(3)]]),
    "cartesian_prod": (lambda m, a, b: m.cartesian_prod(a, b), [[_f(2), _f(3)], [_i(0), _i(2)]]),
    "cartesian_prod_one": (lambda m, a: m.cartesian_prod(a), [[_f(3)]]),
    "combinations": (lambda m, x: m.combinations(x), [[_f(4)], [_i(1)]]),
    "combinations_r3": (lambda m, x: m.combinations(x, r=3, with_replacement=True), [[_f(3)], [_f(0)]]),
    "atleast_1d": (lambda m, a, b: m.atleast_1d(a, b), [[_f(), _f(2, 2)]]),
    "atleast_2d": (lambda m, a, b, c: m.atleast_2d((a, b, c)), [[_f(), _f(3), _i(1, 2, 1)]]),
    "atleast_3d": (lambda m, a, b, c, d: m.atleast_3d([a, b, c, d]), [[_f(), _f(3), _f(2, 3), _f(1, 2, 1, 1)]]),
    "atleast_3d_one": (lambda m, a: m.atleast_3d(a), [[_f(2, 3)]]),
    "unfold": (lambda m, x: x.unfold(1, 2, 3), [[_f(2, 9)], [_i(2, 6)]]),
    "unfold_patches": (lambda m, x: x.unfold(0, 2, 2), [[_f(4, 3)]]),
    "unfold_one_window": (lambda m, x: x.unfold(0, 3, 1), [[_f(3, 2)]]),
    "unfold_0d": (lambda m, x: x.unfold(0, 1, 1), [[_f()]]),
    "unfold_gap_at_the_end": (lambda m, x: x.unfold(1, 2, 3), [[_f(2, 8)]]),
    "unfold_overlapping": (lambda m, x: x.unfold(-1, 3, 1), [[_f(2, 5)], [_i(4)]]),
    "narrow_copy": (lambda m, x: x.narrow_copy(1, 1, 2), [[_f(2, 4)]]),
    "mH": (lambda m, x: x.mH, [[_f(2, 3, 4)]]),
    "H": (lambda m, x: x.H, [[_f(3, 4)]]),
    "swapaxes": (lambda m, x: x.swapaxes(0, 2), [[_f(2, 3, 4)]]),
    "swapdims": (lambda m, x: m.swapdims(x, -1, 0), [[_f(2, 3)]]),
    "moveaxis": (lambda m, x: x.moveaxis([0, 1], [2, 0]), [[_f(2, 3, 4)]]),
}

# NOTE: writing through overlapping windows: torch writes each memory location several times (add_ adds
# repeatedly); aotjax refuses, as for expanded views
WRITES_RAISE = {"unfold_overlapping"}


def _outs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _torch_dtype(t):
    return np.dtype(INT) if t.dtype == torch.int64 else np.dtype(str(t.dtype).removeprefix("torch."))


def _close(got, want, tol=TOL):
    assert isinstance(got, aotjax.Tensor), type(got)
    assert got.shape == tuple(want.shape), (got.shape, tuple(want.shape))
    assert got.dtype == _torch_dtype(want), (got.dtype, want.dtype)
    np.testing.assert_allclose(as_np(got), want.detach().numpy(), rtol=tol, atol=tol)


def _both(fn, arrays):
    ours = [aotjax.tensor(a) for a in arrays]
    theirs = [torch.tensor(a) for a in arrays]
    return ours, theirs, fn(aotjax, *ours), fn(torch, *theirs)


def _check_writes(name, fn, arrays):
    """Which results alias the inputs: a write into each input after the op, then into each result, is seen
    (or not) on the other side exactly as in torch."""
    ours, theirs, got, want = _both(fn, arrays)
    for a, b in zip(ours, theirs):
        a.add_(1)
        b.add_(1)
    for g, w in zip(_outs(got), _outs(want)):
        _close(g, w)
    for k in range(len(_outs(want))):
        ours, theirs, got, want = _both(fn, arrays)
        try:
            _outs(want)[k].mul_(2).add_(3)
        except RuntimeError:  # torch refuses writes into expanded (overlapping) results
            continue
        if name in WRITES_RAISE:
            with pytest.raises(AliasingError, match="overlap"):
                _outs(got)[k].mul_(2)
            continue
        _outs(got)[k].mul_(2).add_(3)
        for a, b in zip(ours, theirs):
            _close(a, b)


@pytest.mark.parametrize("name", list(CASES))
def test_op_matches_torch_eagerly_jitted_aliasing_and_its_vjp(name):
    fn, samples = CASES[name]
    for i, arrays in enumerate(samples):
        _, _, got, want = _both(fn, arrays)
        assert isinstance(got, (tuple, list)) == isinstance(want, (tuple, list)), (type(got), type(want))
        assert len(_outs(got)) == len(_outs(want))
        for g, w in zip(_outs(got), _outs(want)):
            _close(g, w)
        if i == 0:  # NOTE: one compiled function per op
            jitted = aotjax.jit(lambda *xs: fn(aotjax, *xs))(*map(aotjax.tensor, arrays))
            for g, w in zip(_outs(jitted), _outs(want)):
                _close(g, w)
        _check_vjp(fn, arrays, i)
    _check_writes(name, fn, samples[0])


def _check_vjp(fn, arrays, seed):
    wrt = [k for k, a in enumerate(arrays) if a.dtype == FLOAT]
    if not wrt:
        return

    def call(m, diffs):
        xs = list(arrays)
        for k, d in zip(wrt, diffs):
            xs[k] = d
        xs = [x if not isinstance(x, np.ndarray) else (aotjax.tensor(x) if m is aotjax else torch.tensor(x))
              for x in xs]
        return fn(m, *xs)

    txs = [torch.tensor(arrays[k], requires_grad=True) for k in wrt]
    want = _outs(call(torch, txs))
    floats = [k for k, w in enumerate(want) if w.is_floating_point()]
    if not floats:
        return
    cts = [_f(*want[k].shape, seed=seed + 10 + k) for k in floats]
    needed = [w for k, w in enumerate(want) if k in floats]
    grads = torch.autograd.grad(needed, txs, [torch.tensor(c) for c in cts], allow_unused=True)

    def ours(*diffs):
        outs = _outs(call(aotjax, diffs))
        return tuple(outs[k] for k in floats)

    _, vjp = aotjax.vjp(ours, *(aotjax.tensor(arrays[k]) for k in wrt))
    for g, w, k in zip(vjp(tuple(aotjax.tensor(c) for c in cts)), grads, wrt):
        _close(g, torch.zeros(arrays[k].shape, dtype=w.dtype if w is not None else torch.float32) if w is None else w,
               10 * TOL)


def test_broadcast_shapes_matches_torch():
    for shapes in [((2, 1), (3,)), (4, (1, 4)), ((0, 1), (5,)), ((),), ()]:
        assert aotjax.broadcast_shapes(*shapes) == tuple(torch.broadcast_shapes(*shapes))
    with pytest.raises(ShapeError, match="cannot be broadcast"):
        aotjax.broadcast_shapes((2,), (3,))


def test_unfold_views_share_writes_with_the_input_in_both_directions():
    x = aotjax.arange(9.0)
    u = x.unfold(0, 2, 3)
    u[1, 0] = 100.0
    assert as_np(x)[3] == 100.0
    x.zero_()
    assert as_np(u).sum() == 0.0


def test_repeat_interleave_with_traced_counts_needs_output_size():
    x, r = aotjax.tensor([1.0, 2.0]), aotjax.tensor([2, 1])
    with pytest.raises(UnsupportedError, match="output_size"):
        aotjax.jit(lambda a, b: aotjax.repeat_interleave(a, b))(x, r)
    with pytest.raises(ShapeError, match="output_size 4 is not the sum"):
        aotjax.repeat_interleave(x, r, output_size=4)


def test_vmap_of_compositions_is_the_loop():
    xs = aotjax.tensor(_f(3, 2, 4))
    outs = aotjax.vmap(lambda x: (x.unfold(1, 2, 2), aotjax.rot90(x), x.diag_embed(1), x.repeat_interleave(2, 0)))(xs)
    for k in range(3):
        t = torch.tensor(_f(3, 2, 4)[k])
        for g, w in zip(outs, (t.unfold(1, 2, 2), torch.rot90(t), t.diag_embed(1), t.repeat_interleave(2, 0))):
            np.testing.assert_allclose(as_np(g)[k], w.numpy(), rtol=TOL, atol=TOL)


@pytest.mark.parametrize("call, match", [
    (lambda: aotjax.rot90(aotjax.zeros(2, 2), 1, (0, 0)), "rotation dims to be different"),
    (lambda: aotjax.rot90(aotjax.zeros(2), 1), "total dims >= 2"),
    (lambda: aotjax.hsplit(aotjax.zeros(2, 3), 2), "not divisible by the split_size 2"),
    (lambda: aotjax.vsplit(aotjax.zeros(3), 1), "at least 2 dimension"),
    (lambda: aotjax.diag(aotjax.zeros(2, 2, 2)), "1D or 2D"),
    (lambda: aotjax.zeros(4).unfold(0, 5, 1), "maximum size for tensor at dimension 0 is 4 but size is 5"),
    (lambda: aotjax.zeros(3).mH, "matrices or batches of matrices"),
    (lambda: aotjax.zeros(2, 2, 2).H, r"only supported on matrices \(2-D tensors\)"),
    (lambda: aotjax.block_diag(aotjax.zeros(1, 1, 1)), "2 or fewer dimensions"),
    (lambda: aotjax.meshgrid(aotjax.zeros(2), aotjax.zeros(2, dtype=aotjax.int32)), "same dtype"),
    (lambda: aotjax.unflatten(aotjax.zeros(6), 0, (4, -1)), "don't multiply up"),
    (lambda: aotjax.tensor_split(aotjax.zeros(6), 0), "larger than 0"),
    (lambda: aotjax.combinations(aotjax.zeros(2, 2)), "1D vector"),
])
def test_errors_name_the_op_and_the_problem(call, match):
    with pytest.raises(ShapeError, match=match):
        call()
