"""The creation and distribution ops against torch: deterministic factories (`Tensor.new_*`, `logspace`,
`tril_indices`, `triu_indices`, `empty_strided`) equal torch's exactly, eagerly and under `jit`; random samplers
(`normal poisson multinomial randperm randint_like exponential_ geometric_ cauchy_ log_normal_ random_`) have
torch's dtypes, support and distribution statistics (20k samples), draw the same numbers from the same seed eagerly
and compiled, advance their generator, and follow vmap's `randomness`."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax
from aotjax.core.errors import UnsupportedError
from tests.helpers import INT, X64
from tests.op_records import as_np

N = 20_000


def _mode_dtype(torch_dtype) -> np.dtype:
    """torch's dtype as this mode has it (without x64, 64-bit types are their 32-bit forms)."""
    dt = np.dtype(torch.empty(0, dtype=torch_dtype).numpy().dtype)
    if not X64 and dt.itemsize == 8:
        dt = np.dtype({"f": np.float32, "i": np.int32, "u": np.uint32}[dt.kind])
    return dt


def _same(got, want):
    want_np = want.numpy()
    assert got.dtype == _mode_dtype(want.dtype), (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape)
    if want_np.dtype.kind == "f":
        np.testing.assert_allclose(as_np(got), want_np, rtol=1e-6 if not X64 else 1e-12)
    else:
        np.testing.assert_array_equal(as_np(got), want_np)


# -- deterministic factories ---------------------------------------------------------------------------
# name, aotjax fn of x, torch fn of tx, the input (as a numpy array)
_F = np.array([[1.5, -2.0, 3.0]], dtype=np.float32)
_I = np.array([1, 2, 3], dtype=np.int32)
FACTORIES = [
    ("new_zeros", lambda x: x.new_zeros(2, 3), lambda x: x.new_zeros(2, 3), _F),
    ("new_zeros_int_tuple", lambda x: x.new_zeros((2,)), lambda x: x.new_zeros((2,)), _I),
    ("new_ones_dtype", lambda x: x.new_ones(3, dtype=aotjax.int8), lambda x: x.new_ones(3, dtype=torch.int8), _F),
    ("new_ones_0d", lambda x: x.new_ones(()), lambda x: x.new_ones(()), _I),
    ("new_full_int_float_fill", lambda x: x.new_full((2, 2), 3.7), lambda x: x.new_full((2, 2), 3.7), _I),
    ("new_full_float", lambda x: x.new_full((0, 2), -1.0), lambda x: x.new_full((0, 2), -1.0), _F),
    ("new_empty", lambda x: x.new_empty(2, 0), lambda x: x.new_empty(2, 0), _F),
    ("new_tensor", lambda x: x.new_tensor([1.5, 2.5]), lambda x: x.new_tensor([1.5, 2.5]), _I),
    ("new_tensor_dtype", lambda x: x.new_tensor([1, 2], dtype=aotjax.float32),
     lambda x: x.new_tensor([1, 2], dtype=torch.float32), _I),
    ("logspace", lambda x: aotjax.logspace(-1, 2, 7), lambda x: torch.logspace(-1, 2, 7), _F),
    ("logspace_base2_int", lambda x: aotjax.logspace(0, 5, 6, base=2, dtype=aotjax.int32),
     lambda x: torch.logspace(0, 5, 6, base=2, dtype=torch.int32), _F),
    ("logspace_one_and_none", lambda x: aotjax.logspace(3, 4, 1), lambda x: torch.logspace(3, 4, 1), _F),
    ("logspace_empty", lambda x: aotjax.logspace(0, 1, 0), lambda x: torch.logspace(0, 1, 0), _F),
    ("tril_indices", lambda x: aotjax.tril_indices(4, 3), lambda x: torch.tril_indices(4, 3), _F),
    ("tril_indices_offset", lambda x: aotjax.tril_indices(3, 5, offset=-1),
     lambda x: torch.tril_indices(3, 5, offset=-1), _F),
    ("tril_indices_offset_big", lambda x: aotjax.tril_indices(3, 3, 5), lambda x: torch.tril_indices(3, 3, 5), _F),
    ("triu_indices", lambda x: aotjax.triu_indices(3, 4, 1), lambda x: torch.triu_indices(3, 4, 1), _F),
    ("triu_indices_neg_int32", lambda x: aotjax.triu_indices(4, 4, -2, dtype=aotjax.int32),
     lambda x: torch.triu_indices(4, 4, -2, dtype=torch.int32), _F),
    ("triu_indices_empty", lambda x: aotjax.triu_indices(0, 3), lambda x: torch.triu_indices(0, 3), _F),
    ("empty_strided", lambda x: aotjax.empty_strided((2, 3), (3, 1)).zero_(),
     lambda x: torch.empty_strided((2, 3), (3, 1)).zero_(), _F),
    ("eye_nm", lambda x: aotjax.eye(2, 3), lambda x: torch.eye(2, 3), _F),
    ("zeros_like_dtype", lambda x: aotjax.zeros_like(x, dtype=aotjax.int32),
     lambda x: torch.zeros_like(x, dtype=torch.int32), _F),
    ("full_like_dtype", lambda x: aotjax.full_like(x, 2, dtype=aotjax.float32),
     lambda x: torch.full_like(x, 2, dtype=torch.float32), _I),
]


@pytest.mark.parametrize("name,f,tf,x", FACTORIES, ids=[c[0] for c in FACTORIES])
def test_factories_equal_torch_eagerly_and_under_jit(name, f, tf, x):
    want = tf(torch.tensor(x))
    _same(f(aotjax.tensor(x)), want)
    _same(aotjax.jit(f)(aotjax.tensor(x)), want)


def test_factory_errors():
    with pytest.raises(UnsupportedError, match="empty_strided: only strides that cover the tensor densely"):
        aotjax.empty_strided((2, 3), (4, 1))  # a gap between rows
    assert aotjax.empty_strided((2, 3), (1, 2)).stride() == torch.empty_strided((2, 3), (1, 2)).stride()
    with pytest.raises(TypeError, match="tril_indices: dtype must be an integer dtype"):
        aotjax.tril_indices(2, 2, dtype=aotjax.float32)
    assert aotjax.empty_strided((1, 3), (7, 1)).shape == (1, 3)  # a size-1 dim's stride is free, as in torch


# -- random samplers: dtype, support and statistics ---------------------------------------------------------
def _stats(t):
    a = as_np(t).astype(np.float64)
    return a, a.mean(), a.var()


def test_normal_overloads_shapes_dtypes_and_statistics():
    g = aotjax.Generator(1)
    a, m, v = _stats(aotjax.normal(aotjax.full((N,), 2.0), aotjax.tensor(3.0), generator=g))
    assert abs(m - 2.0) < 0.1 and abs(v - 9.0) < 0.4
    a, m, v = _stats(aotjax.normal(-1.0, 0.5, size=(N // 100, 100), generator=g))
    assert a.shape == (N // 100, 100) and abs(m + 1.0) < 0.02 and abs(v - 0.25) < 0.015
    assert aotjax.normal(0.0, 1.0, (2,)).dtype == np.float32
    assert aotjax.normal(0.0, 1.0, (2,), dtype=aotjax.float16).dtype == np.float16
    t = aotjax.normal(1.0, aotjax.ones(2, 1), generator=g)  # float mean, tensor std
    assert t.shape == (2, 1) and t.dtype == np.float32
    t = aotjax.normal(aotjax.zeros(3), aotjax.ones(2, 1), generator=g)  # broadcast
    assert t.shape == torch.normal(torch.zeros(3), torch.ones(2, 1)).shape
    t = aotjax.normal(aotjax.zeros(3, dtype=aotjax.float16), 2.0)
    assert t.dtype == np.float16 == torch.normal(torch.zeros(3, dtype=torch.float16), 2.0).numpy().dtype
    with pytest.raises(TypeError, match="normal: with a number mean and std, give the shape"):
        aotjax.normal(0.0, 1.0)
    with pytest.raises(aotjax.core.errors.DTypeError, match="normal: expects a floating-point tensor"):
        aotjax.normal(aotjax.tensor([1, 2]), 1.0)


def test_normal_and_poisson_have_zero_gradients_as_torch():
    tm = torch.zeros(3, requires_grad=True)
    torch.normal(tm, 1.0).sum().backward()
    g = aotjax.grad(lambda m: aotjax.normal(m, 1.0, generator=aotjax.Generator(0)).sum())(aotjax.zeros(3))
    np.testing.assert_array_equal(as_np(g), tm.grad.numpy())


def test_poisson_statistics_and_under_vmap():
    # NOTE: jax's Poisson sampler takes seconds to compile: one program serves statistics and both vmap modes
    rates = aotjax.tensor([0.0, 0.5, 3.5, 40.0]).expand(N // 4, 4).contiguous()
    aotjax.manual_seed(2)
    draws = aotjax.vmap(aotjax.poisson, randomness="different")(rates)
    assert draws.dtype == np.float32 == torch.poisson(torch.tensor([1.0])).numpy().dtype
    a = as_np(draws).astype(np.float64)
    assert (a >= 0).all() and (a == np.round(a)).all() and (a[:, 0] == 0).all()
    np.testing.assert_allclose(a.mean(0)[1:], [0.5, 3.5, 40.0], rtol=0.05)
    np.testing.assert_allclose(a.var(0)[1:], [0.5, 3.5, 40.0], rtol=0.1)
    same = as_np(aotjax.vmap(aotjax.poisson, randomness="same")(rates))
    assert (same == same[0]).all() and not (same[:, 3] == a[:, 3]).all()
    with pytest.raises(RuntimeError, match="poisson draws from a random generator while vmap's randomness is"):
        aotjax.vmap(aotjax.poisson)(rates)
    assert aotjax.poisson(aotjax.ones(0, 2)).shape == (0, 2)
    with pytest.raises(aotjax.core.errors.DTypeError, match="poisson: expects a floating-point tensor"):
        aotjax.poisson(aotjax.tensor([1, 2]))


def test_multinomial():
    g = aotjax.Generator(3)
    p = aotjax.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 1.0, 1.0]])
    with_r = as_np(aotjax.multinomial(p, N // 2, replacement=True, generator=g))
    assert with_r.dtype == INT and with_r.shape == (2, N // 2)
    freq = np.stack([np.bincount(r, minlength=4) / (N // 2) for r in with_r])
    np.testing.assert_allclose(freq, [[0.1, 0.0, 0.6, 0.3], [0.25] * 4], atol=0.02)
    assert freq[0, 1] == 0
    # without replacement: distinct indices; the first draw is categorical, zero weights never drawn
    rows = aotjax.tensor([0.1, 0.0, 0.6, 0.3]).expand(N // 4, 4).contiguous()
    without = as_np(aotjax.multinomial(rows, 3, generator=g))
    assert without.shape == (N // 4, 3) and (np.sort(without, 1)[:, 1:] != np.sort(without, 1)[:, :-1]).all()
    assert (without != 1).all()
    np.testing.assert_allclose(np.bincount(without[:, 0], minlength=4) / (N // 4), [0.1, 0, 0.6, 0.3], atol=0.02)
    assert aotjax.multinomial(aotjax.tensor([0.2, 0.8]), 1).shape == torch.multinomial(torch.tensor([0.2, 0.8]),
                                                                                         1).shape
    with pytest.raises(ValueError, match="cannot draw 3 samples without replacement from 2 categories"):
        aotjax.multinomial(aotjax.tensor([0.5, 0.5]), 3)
    assert aotjax.tensor([0.0, 1.0]).multinomial(1, generator=g).tolist() == [1]


def test_randperm_and_randint_like():
    g = aotjax.Generator(4)
    perms = np.stack([as_np(aotjax.randperm(10, generator=g)) for _ in range(3)])
    assert perms.dtype == INT and (np.sort(perms, 1) == np.arange(10)).all()
    assert len({tuple(p) for p in perms}) == 3
    assert aotjax.randperm(0).shape == (0,) and aotjax.randperm(3, dtype=aotjax.int8).dtype == np.int8
    a, m, _ = _stats(aotjax.randint_like(aotjax.zeros(N), 3, 7, generator=g))
    assert aotjax.randint_like(aotjax.zeros(2), 3).dtype == np.float32
    assert set(np.unique(a)) == {3, 4, 5, 6} and abs(m - 4.5) < 0.05
    b = aotjax.randint_like(aotjax.zeros(5, dtype=aotjax.uint8), 256, generator=g)
    assert b.dtype == np.uint8
    assert torch.randint_like(torch.zeros(2, dtype=torch.uint8), 256).dtype == torch.uint8


def _fills(x, xu8, xb, xi32):
    g = aotjax.Generator(5)
    return (x.clone().exponential_(2.0, generator=g), x.clone().geometric_(0.25, generator=g),
            x.clone().cauchy_(1.0, 2.0, generator=g), x.clone().log_normal_(0.5, 0.25, generator=g),
            x.clone().random_(2, 6, generator=g), x.clone().random_(3, generator=g), x.clone().random_(generator=g),
            xu8.clone().random_(generator=g), xb.clone().random_(generator=g), xi32.clone().random_(generator=g))


def test_in_place_fills_statistics():
    x = aotjax.zeros(3)
    assert x.exponential_(generator=aotjax.Generator(0)) is x and (as_np(x) > 0).all()
    assert aotjax.zeros(3, dtype=aotjax.int32).geometric_(0.5).dtype == np.int32
    # NOTE: one compiled program draws every sample (eager draws equal compiled ones: the test below)
    outs = aotjax.jit(_fills)(aotjax.zeros(N), aotjax.zeros(N, dtype=aotjax.uint8), aotjax.zeros(100, dtype=bool),
                              aotjax.zeros(N, dtype=aotjax.int32))
    expo, geom, cauchy, lognormal, r26, r3, rfull, ru8, rb, ri32 = (as_np(t) for t in outs)
    a, m, v = _stats(expo)
    assert (a >= 0).all() and abs(m - 0.5) < 0.02 and abs(v - 0.25) < 0.02
    a, m, v = _stats(geom)
    assert (a >= 1).all() and (a == np.round(a)).all() and abs(m - 4.0) < 0.15 and abs(v - 12.0) < 1.2
    q1, q2, q3 = np.quantile(cauchy.astype(np.float64), [0.25, 0.5, 0.75])
    assert abs(q2 - 1.0) < 0.1 and abs((q3 - q1) - 4.0) < 0.25
    a = lognormal.astype(np.float64)
    assert (a > 0).all() and abs(np.log(a).mean() - 0.5) < 0.01 and abs(np.log(a).std() - 0.25) < 0.01
    a, m, _ = _stats(r26)
    assert set(np.unique(a)) == {2, 3, 4, 5} and abs(m - 3.5) < 0.05
    assert set(np.unique(r3)) == {0, 1, 2}
    assert rfull.min() >= 0 and rfull.max() <= 2 ** 24 and rfull.max() > 2 ** 23
    assert ru8.dtype == np.uint8 and ru8.max() == 255 and ru8.min() == 0
    assert rb.dtype == np.bool_ and rb.any() and not rb.all()
    assert ri32.dtype == np.int32 and ri32.min() >= 0 and ri32.max() > 2 ** 30
    with pytest.raises(ValueError, match="random_: expects 'from'"):
        aotjax.zeros(2).random_(3, 3)
    with pytest.raises(ValueError, match="geometric_: p must be in"):
        aotjax.zeros(2).geometric_(1.5)


# -- the generator: same seed, same numbers, eagerly and compiled; the state advances --------------------------
def _all_draws(x):
    return (aotjax.normal(x, 1.0), aotjax.normal(0.0, 2.0, (3,)),
            aotjax.multinomial(x.abs() + 1, 2), aotjax.randperm(4), aotjax.randint_like(x, 5),
            x.clone().exponential_(), x.clone().geometric_(0.5), x.clone().cauchy_(), x.clone().log_normal_(),
            x.clone().random_(0, 9))


def test_same_seed_same_numbers_eagerly_and_under_jit_and_the_state_advances():
    x = aotjax.zeros(3)
    aotjax.manual_seed(11)
    eager = [[as_np(t) for t in _all_draws(x)] for _ in range(2)]
    compiled = aotjax.jit(_all_draws)
    aotjax.manual_seed(11)
    jitted = [[as_np(t) for t in compiled(x)] for _ in range(2)]
    for e, j in zip(eager, jitted, strict=True):
        for a, b in zip(e, j, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-6)
    assert compiled.trace_count == 1
    assert not np.allclose(eager[0][0], eager[1][0]) and not np.allclose(jitted[0][0], jitted[1][0])
    g = aotjax.Generator(9)
    before = as_np(g.get_state())
    first = as_np(x.clone().exponential_(generator=g))
    assert not (as_np(g.get_state()) == before).all()
    np.testing.assert_array_equal(as_np(x.clone().exponential_(generator=g.manual_seed(9))), first)


def test_under_vmap_draws_follow_randomness():
    x = aotjax.zeros(4, 6)
    same = as_np(aotjax.vmap(lambda r: aotjax.normal(r, 1.0), randomness="same")(x))
    diff = as_np(aotjax.vmap(lambda r: r.clone().exponential_(), randomness="different")(x))
    assert (same == same[0]).all() and not (diff == diff[0]).all()
    with pytest.raises(RuntimeError, match="multinomial draws from a random generator"):
        aotjax.vmap(lambda r: aotjax.multinomial(r + 1, 2))(x)


@pytest.mark.slow  # NOTE: jax's Poisson sampler compiles for seconds, eagerly and again under jit
def test_poisson_same_seed_same_numbers_eagerly_and_under_jit():
    rates = aotjax.tensor([0.5, 3.0, 30.0])
    aotjax.manual_seed(3)
    eager = [as_np(aotjax.poisson(rates)) for _ in range(3)]
    aotjax.manual_seed(3)
    compiled = aotjax.jit(aotjax.poisson)
    np.testing.assert_array_equal(np.stack([as_np(compiled(rates)) for _ in range(3)]), np.stack(eager))
    assert not all((e == eager[0]).all() for e in eager[1:])


def test_randint_takes_every_spelling_torch_takes():
    for call in (lambda T: T.randint(5, size=(3,)), lambda T: T.randint(5, (2, 2)), lambda T: T.randint(2, 5, (4,)),
                 lambda T: T.randint(low=2, high=5, size=(4,)), lambda T: T.randint(high=5, size=(1,))):
        ours, theirs = call(aotjax), call(torch)
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert int(ours.min()) >= int(theirs.min()) - 5 and int(ours.max()) < 5
    with pytest.raises(TypeError, match="randint: a size is required"):
        aotjax.randint(5)
