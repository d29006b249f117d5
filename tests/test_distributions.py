"""`aotjax.distributions` against `torch.distributions`: each program runs once with `lib = torch` and once with
`lib = aotjax` on the same parameters and values, and the results must agree (values, shapes, dtypes, errors).
Samples come from different generators, so they are compared by shape, dtype, reproducibility and statistics. The
machinery (sampling, validation, KL dispatch, repr) is `x32_only`: the x64 pass reruns the numbers only."""
from __future__ import annotations

import numpy as np
import pytest

import aotjax
from aotjax.core.avals import canonicalize_dtype
from aotjax.core.interpreter import Tracer
from tests.helpers import asks_for_64_bits

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-5, 1e-6
_rng = np.random.default_rng(0)


def _normal(*shape) -> np.ndarray:
    return _rng.standard_normal(shape).astype(np.float32)


def _uniform(*shape, low=0.0, high=1.0) -> np.ndarray:
    return _rng.uniform(low, high, shape).astype(np.float32)


def _np(t) -> np.ndarray:
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.detach())


def _dtype(t) -> np.dtype:
    """The dtype of a tensor of either library, as aotjax's mode holds it (int64 is int32 without x64)."""
    return canonicalize_dtype(np.dtype(str(t.dtype).removeprefix("torch.")))


def _close(got, want, rtol=RTOL, atol=ATOL) -> None:
    """An aotjax result against torch's: a tensor, or a tuple of them, with the same shapes and dtypes."""
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w, rtol, atol)
        return
    assert tuple(got.shape) == tuple(want.shape)
    assert _dtype(got) == _dtype(want)
    np.testing.assert_allclose(_np(got), _np(want), rtol=rtol, atol=atol)


def _both(program, rtol=RTOL, atol=ATOL) -> None:
    """`program(lib)` run by torch and aotjax; the results agree."""
    _close(program(aotjax), program(torch), rtol, atol)


def _t(lib, a):
    return lib.tensor(a) if isinstance(a, np.ndarray) else a


# -- one row per distribution: how to make it from arrays, a value in its support, what it computes ---------------
LOC, SCALE = _normal(3, 1), _uniform(4, low=0.5, high=2.0)  # NOTE: broadcast to the batch shape (3, 4)
PROBS = _uniform(3, 4, low=0.05, high=0.95)
WEIGHTS = _uniform(2, 3, 5, low=0.1, high=1.0)  # unnormalized categorical weights
STATS = ("mean", "mode", "variance", "stddev")
LOGITS, LOGITS_Q, LOC_Q, PROBS_Q = 3 * _normal(4, 6), _normal(3, 5), _normal(4), _uniform(4)
QUANTILES = _uniform(2, 3, 4, low=0.05, high=0.95)  # NOTE: away from 0 and 1, where float32 icdf is ill-conditioned
CASES = {
    "normal": (lambda lib: lib.distributions.Normal(_t(lib, LOC), _t(lib, SCALE)), _normal(2, 3, 4),
               STATS + ("entropy", "log_prob", "cdf", "icdf")),
    "normal_floats": (lambda lib: lib.distributions.Normal(0.5, 2.0), _normal(5),
                      STATS + ("entropy", "log_prob", "cdf", "icdf")),
    "normal_tensor_and_float": (lambda lib: lib.distributions.Normal(_t(lib, LOC), 1.5), _normal(3, 1),
                                STATS + ("entropy", "log_prob", "cdf")),
    "laplace": (lambda lib: lib.distributions.Laplace(_t(lib, LOC), _t(lib, SCALE)), _normal(3, 4),
                STATS + ("entropy", "log_prob", "cdf", "icdf")),
    "exponential": (lambda lib: lib.distributions.Exponential(_t(lib, SCALE)), _uniform(3, 4, high=3.0),
                    STATS + ("entropy", "log_prob", "cdf", "icdf")),
    "uniform": (lambda lib: lib.distributions.Uniform(_t(lib, LOC), _t(lib, LOC + SCALE)), LOC + 0.4 * SCALE,
                ("mean", "variance", "stddev", "entropy", "log_prob", "cdf", "icdf")),
    "bernoulli_probs": (lambda lib: lib.distributions.Bernoulli(probs=_t(lib, PROBS)),
                        (_uniform(3, 4) > 0.5).astype(np.float32), STATS + ("entropy", "log_prob")),
    "bernoulli_logits": (lambda lib: lib.distributions.Bernoulli(logits=_t(lib, LOC)),
                         (_uniform(2, 3, 1) > 0.5).astype(np.float32), STATS + ("entropy", "log_prob")),
    "bernoulli_half": (lambda lib: lib.distributions.Bernoulli(0.5), np.float32(1.0), ("mode", "entropy")),
    "categorical_probs": (lambda lib: lib.distributions.Categorical(probs=_t(lib, WEIGHTS)), [[1, 4, 0], [2, 2, 3]],
                          ("mean", "mode", "variance", "entropy", "log_prob")),
    "categorical_logits": (lambda lib: lib.distributions.Categorical(logits=_t(lib, LOGITS)), [5, 0, 1, 3],
                           ("mode", "entropy", "log_prob")),
    "onehot": (lambda lib: lib.distributions.OneHotCategorical(logits=_t(lib, LOGITS[:3, :4])),
               np.eye(4, dtype=np.float32)[[2, 0, 3]], ("mean", "mode", "variance", "entropy", "log_prob")),
    "independent": (lambda lib: lib.distributions.Independent(
        lib.distributions.Normal(_t(lib, LOC), _t(lib, SCALE)), 1), _normal(2, 3, 4),
        STATS + ("entropy", "log_prob")),
}


def _compute(d, what: str, value, lib):
    if what in STATS:
        return getattr(d, what)
    if what == "entropy":
        return d.entropy()
    if what == "icdf":
        return d.icdf(lib.tensor(QUANTILES[(0,) * (3 - np.ndim(value))]))
    return getattr(d, what)(lib.tensor(value))


@pytest.mark.parametrize("case", list(CASES))
def test_shapes_statistics_log_prob_and_cdf_match_torch(case):
    make, value, computed = CASES[case]
    want, got = make(torch), make(aotjax)
    assert (got.batch_shape, got.event_shape) == (tuple(want.batch_shape), tuple(want.event_shape))
    assert (got.has_rsample, got.has_enumerate_support) == (want.has_rsample, want.has_enumerate_support)
    for what in computed:
        _close(_compute(got, what, value, aotjax), _compute(want, what, value, torch))


@pytest.mark.x32_only
@pytest.mark.parametrize("case", [c for c in CASES if c not in ("normal_tensor_and_float", "bernoulli_half")])
def test_samples_have_torchs_shape_and_dtype_and_no_gradient(case):
    make = CASES[case][0]
    want, got = make(torch).sample([2, 1]), make(aotjax).sample([2, 1])
    assert (tuple(got.shape), _dtype(got), got.requires_grad) == (tuple(want.shape), _dtype(want), False)
    if make(torch).has_rsample:
        assert tuple(make(aotjax).rsample((2, 1)).shape) == tuple(make(torch).rsample((2, 1)).shape)


@pytest.mark.x32_only
def test_a_sample_of_the_empty_shape_is_one_draw_per_batch_index():
    for make in (CASES["normal"][0], CASES["categorical_probs"][0], CASES["onehot"][0]):
        want, got = make(torch).sample(), make(aotjax).sample()
        assert (tuple(got.shape), _dtype(got)) == (tuple(want.shape), _dtype(want))


@pytest.mark.x32_only
def test_sample_shape_must_be_a_tuple():
    for lib in (torch, aotjax):
        with pytest.raises(TypeError):
            lib.distributions.Normal(0.0, 1.0).sample(5)


# -- samples: statistics and the generator ---------------------------------------------------------------------
SAMPLED = {
    "normal": lambda lib: lib.distributions.Normal(lib.tensor([-1.0, 2.0]), lib.tensor([0.5, 2.0])),
    "laplace": lambda lib: lib.distributions.Laplace(lib.tensor([-1.0, 2.0]), lib.tensor([0.5, 1.0])),
    "exponential": lambda lib: lib.distributions.Exponential(lib.tensor([0.5, 4.0])),
    "uniform": lambda lib: lib.distributions.Uniform(lib.tensor([-1.0, 2.0]), lib.tensor([0.0, 5.0])),
    "bernoulli": lambda lib: lib.distributions.Bernoulli(logits=lib.tensor([-1.0, 0.5])),
    "categorical": lambda lib: lib.distributions.OneHotCategorical(probs=lib.tensor([0.1, 0.6, 0.3])),
}


@pytest.mark.x32_only
@pytest.mark.parametrize("case", list(SAMPLED))
def test_sample_mean_and_std_match_the_distributions(case):
    aotjax.manual_seed(0)
    d = SAMPLED[case](aotjax)
    x = d.sample((20000,))
    np.testing.assert_allclose(_np(x.mean(0)), _np(d.mean), atol=0.05)
    np.testing.assert_allclose(_np(x.std(0)), _np(d.stddev), rtol=0.05, atol=0.01)


@pytest.mark.x32_only
def test_categorical_sample_frequencies():
    aotjax.manual_seed(0)
    probs = aotjax.tensor([[0.1, 0.6, 0.3], [0.5, 0.0, 0.5]])
    x = aotjax.distributions.Categorical(probs=probs).sample((20000,))
    assert tuple(x.shape) == (20000, 2) and _dtype(x) == np.dtype(aotjax.default_int_dtype())
    counts = np.stack([np.bincount(_np(x)[:, i], minlength=3) for i in range(2)]) / 20000
    np.testing.assert_allclose(counts, _np(probs), atol=0.02)


@pytest.mark.x32_only
def test_manual_seed_makes_samples_reproducible():
    d = aotjax.distributions.Normal(aotjax.zeros(3), 1.0)
    c = aotjax.distributions.Categorical(logits=aotjax.zeros(2, 5))
    aotjax.manual_seed(7)
    first = _np(d.sample((4,))), _np(c.sample((4,)))
    aotjax.manual_seed(7)
    again = _np(d.sample((4,))), _np(c.sample((4,)))
    later = _np(d.sample((4,)))
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], later)


# -- rsample: the reparameterization gradients ----------------------------------------------------------------
def _leaf(a):
    return aotjax.tensor(np.asarray(a, dtype=np.float32), requires_grad=True)


def test_rsample_gradients_are_those_of_the_transformed_noise():
    loc, scale = _leaf([0.5, -1.0, 2.0]), _leaf([1.0, 0.5, 3.0])
    x = aotjax.distributions.Normal(loc, scale).rsample((4,))
    x.sum().backward()
    eps = (_np(x) - _np(loc)) / _np(scale)  # x = loc + scale * eps
    np.testing.assert_allclose(_np(loc.grad), [4.0] * 3)
    np.testing.assert_allclose(_np(scale.grad), eps.sum(0), rtol=1e-4, atol=1e-5)

    loc, scale = _leaf([0.5, -1.0]), _leaf([1.0, 2.0])
    x = aotjax.distributions.Laplace(loc, scale).rsample((3,))
    x.sum().backward()
    np.testing.assert_allclose(_np(loc.grad), [3.0, 3.0])
    np.testing.assert_allclose(_np(scale.grad), ((_np(x) - _np(loc)) / _np(scale)).sum(0), rtol=1e-4, atol=1e-5)

    rate = _leaf([0.5, 4.0])
    x = aotjax.distributions.Exponential(rate).rsample((3,))
    x.sum().backward()
    np.testing.assert_allclose(_np(rate.grad), (-_np(x) / _np(rate)).sum(0), rtol=1e-4, atol=1e-6)

    low, high = _leaf([0.0, -2.0]), _leaf([1.0, 3.0])
    x = aotjax.distributions.Uniform(low, high).rsample((3,))
    x.sum().backward()
    u = (_np(x) - _np(low)) / (_np(high) - _np(low))  # x = low + u * (high - low)
    np.testing.assert_allclose(_np(high.grad), u.sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(low.grad), (1 - u).sum(0), rtol=1e-4, atol=1e-5)


def test_sample_is_not_differentiated_under_grad():
    def f(loc):
        d = aotjax.distributions.Normal(loc, 1.0)
        return d.sample().sum() + d.rsample().sum()
    np.testing.assert_allclose(_np(aotjax.grad(f)(aotjax.zeros(3))), [1.0, 1.0, 1.0])


# -- KL divergences ---------------------------------------------------------------------------------------------
def _pair(make_p, make_q):
    return lambda lib: lib.distributions.kl_divergence(make_p(lib), make_q(lib))


KL_PAIRS = {
    "normal": _pair(CASES["normal"][0], lambda lib: lib.distributions.Normal(_t(lib, LOC_Q), 0.7)),
    "laplace": _pair(CASES["laplace"][0], lambda lib: lib.distributions.Laplace(0.3, _t(lib, SCALE[::-1].copy()))),
    "exponential": _pair(CASES["exponential"][0], lambda lib: lib.distributions.Exponential(2.0)),
    "uniform": _pair(lambda lib: lib.distributions.Uniform(_t(lib, np.float32([0.0, 0.0, 0.5])), 1.0),
                     lambda lib: lib.distributions.Uniform(_t(lib, np.float32([-1.0, 0.5, -1.0])), 2.0)),
    "bernoulli": _pair(CASES["bernoulli_probs"][0],
                       lambda lib: lib.distributions.Bernoulli(logits=_t(lib, LOGITS[:3, :4]))),
    "bernoulli_edges": _pair(lambda lib: lib.distributions.Bernoulli(_t(lib, np.float32([0.0, 1.0, 0.3, 0.0]))),
                             lambda lib: lib.distributions.Bernoulli(_t(lib, np.float32([0.4, 0.2, 1.0, 0.0])))),
    "categorical": _pair(CASES["categorical_probs"][0],
                         lambda lib: lib.distributions.Categorical(logits=_t(lib, LOGITS_Q))),
    "categorical_zeros": _pair(
        lambda lib: lib.distributions.Categorical(_t(lib, np.float32([[0.0, 0.5, 0.5], [0.2, 0.8, 0.0]]))),
        lambda lib: lib.distributions.Categorical(_t(lib, np.float32([[0.3, 0.3, 0.4], [0.5, 0.0, 0.5]])))),
    "onehot": _pair(CASES["onehot"][0], lambda lib: lib.distributions.OneHotCategorical(_t(lib, PROBS_Q))),
    "independent": _pair(CASES["independent"][0], lambda lib: lib.distributions.Independent(
        lib.distributions.Normal(_t(lib, LOC_Q), 2.0).expand((3, 4)), 1)),
}


@pytest.mark.parametrize("pair", list(KL_PAIRS))
def test_kl_divergence_matches_torch(pair):
    _both(KL_PAIRS[pair])


@pytest.mark.x32_only
def test_kl_of_an_unregistered_pair_raises_not_implemented_error():
    for lib in (torch, aotjax):
        with pytest.raises(NotImplementedError, match="Categorical and q type Normal"):
            lib.distributions.kl_divergence(lib.distributions.Categorical(logits=lib.zeros(2)),
                                            lib.distributions.Normal(0.0, 1.0))
    with pytest.raises(TypeError, match="Distribution subclass"):
        aotjax.distributions.register_kl(int, aotjax.distributions.Normal)


@pytest.mark.x32_only
def test_register_kl_picks_the_most_specific_pair():
    D = aotjax.distributions

    class Narrow(D.Normal):
        pass

    @D.register_kl(Narrow, D.Normal)
    def _kl_narrow_normal(p, q):
        return aotjax.full(p.batch_shape, 7.0)

    p, q = Narrow(aotjax.zeros(2), 1.0), D.Normal(1.0, 1.0)
    np.testing.assert_allclose(_np(D.kl_divergence(p, q)), [7.0, 7.0])
    np.testing.assert_allclose(_np(D.kl_divergence(q, q)), 0.0)  # Normal ‖ Normal: the registered formula
    np.testing.assert_allclose(_np(D.kl_divergence(q, p)), [0.5, 0.5])  # (Normal, Narrow) falls back to it


# -- validation ---------------------------------------------------------------------------------------------------
INVALID = {
    "scale": lambda lib: lib.distributions.Normal(0.0, lib.tensor([1.0, -1.0])),
    "scale_zero": lambda lib: lib.distributions.Laplace(lib.zeros(2), 0.0),
    "rate": lambda lib: lib.distributions.Exponential(lib.tensor([-0.5])),
    "probs": lambda lib: lib.distributions.Bernoulli(probs=lib.tensor([0.5, 1.5])),
    "probs_simplex": lambda lib: lib.distributions.Categorical(probs=lib.tensor([-0.5, 1.5])),
    "logits": lambda lib: lib.distributions.Categorical(logits=lib.tensor([0.0, float("nan")])),
    "loc": lambda lib: lib.distributions.Normal(lib.tensor([float("nan")]), 1.0),
    "low_high": lambda lib: lib.distributions.Uniform(1.0, lib.tensor([2.0, 0.5])),
    "reinterpreted": lambda lib: lib.distributions.Independent(lib.distributions.Normal(lib.zeros(2), 1.0), 2),
    "both": lambda lib: lib.distributions.Categorical(probs=lib.ones(2), logits=lib.zeros(2)),
    "neither": lambda lib: lib.distributions.Bernoulli(),
    "scalar_probs": lambda lib: lib.distributions.Categorical(probs=lib.tensor(1.0)),
}


@pytest.mark.x32_only
@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_parameters_raise_value_error(case):
    for lib in (torch, aotjax):
        with pytest.raises(ValueError) as info:
            INVALID[case](lib)
    if case in ("scale", "rate", "probs", "logits", "loc"):
        assert f"parameter {case} " in str(info.value)


OUTSIDE = {
    "exponential": (lambda lib: lib.distributions.Exponential(2.0), [1.0, -1.0]),
    "uniform": (lambda lib: lib.distributions.Uniform(0.0, 1.0), [0.5, 1.5]),
    "bernoulli": (lambda lib: lib.distributions.Bernoulli(0.3), [0.0, 0.5]),
    "categorical": (lambda lib: lib.distributions.Categorical(logits=lib.zeros(3)), [0, 3]),
    "onehot": (lambda lib: lib.distributions.OneHotCategorical(logits=lib.zeros(3)), [[1.0, 1.0, 0.0]]),
}


@pytest.mark.x32_only
@pytest.mark.parametrize("case", list(OUTSIDE))
def test_log_prob_outside_the_support_raises_value_error(case):
    make, value = OUTSIDE[case]
    for lib in (torch, aotjax):
        with pytest.raises(ValueError, match="support"):
            make(lib).log_prob(lib.tensor(value))


@pytest.mark.x32_only
def test_log_prob_of_a_wrong_shape_or_a_non_tensor_raises_value_error():
    for lib in (torch, aotjax):
        d = lib.distributions.Normal(lib.zeros(3), 1.0)
        with pytest.raises(ValueError):
            d.log_prob(lib.zeros(2))
        with pytest.raises(ValueError):
            d.log_prob(0.5)
        with pytest.raises(ValueError):
            lib.distributions.OneHotCategorical(logits=lib.zeros(3)).log_prob(lib.zeros(4))


@pytest.mark.x32_only
def test_validate_args_false_and_the_default_switch():
    def program(lib):
        d = lib.distributions.Exponential(lib.tensor([-2.0, 2.0]), validate_args=False)
        return d.log_prob(lib.tensor([-1.0, 1.0]))
    _both(program)
    D = aotjax.distributions.Distribution
    try:
        D.set_default_validate_args(False)
        aotjax.distributions.Normal(0.0, -1.0)  # no check
    finally:
        D.set_default_validate_args(True)
    with pytest.raises(ValueError):
        aotjax.distributions.Normal(0.0, -1.0)
    with pytest.raises(ValueError):
        D.set_default_validate_args("yes")


@pytest.mark.x32_only
def test_traced_tensors_are_not_checked():
    seen = []

    def f(scale, x):
        seen.append(isinstance(scale, Tracer))
        return aotjax.distributions.Normal(0.0, scale).log_prob(x) + aotjax.distributions.Exponential(1.0).log_prob(x)
    out = aotjax.jit(f)(aotjax.tensor([-1.0, 1.0]), aotjax.tensor([0.5, -0.5]))
    assert seen == [True] and np.isnan(_np(out)[0]) and np.isfinite(_np(out)[1])


# -- Independent, Categorical, expand, enumerate_support, repr -----------------------------------------------------
def test_independent_shapes_and_log_prob_sums_the_reinterpreted_dims():
    X = _normal(5, 2, 3, 4)

    def program(lib):
        base = lib.distributions.Normal(_t(lib, LOC), _t(lib, SCALE)).expand((2, 3, 4))
        d = lib.distributions.Independent(base, 2)
        assert (tuple(d.batch_shape), tuple(d.event_shape)) == ((2,), (3, 4))
        x = _t(lib, X)
        assert tuple(d.sample((5,)).shape) == (5, 2, 3, 4)
        e = d.expand((6, 2))
        assert (tuple(e.batch_shape), tuple(e.event_shape), tuple(e.base_dist.batch_shape)) == ((6, 2), (3, 4),
                                                                                               (6, 2, 3, 4))
        return d.log_prob(x), d.entropy(), base.log_prob(x).sum((-2, -1)), e.log_prob(x[:1])
    _both(program)


def test_categorical_with_batched_logits():
    logits = 2 * _normal(3, 5)

    def program(lib):
        d = lib.distributions.Categorical(logits=_t(lib, logits))
        assert tuple(d.param_shape) == (3, 5) and tuple(d.batch_shape) == (3,)
        assert tuple(d.sample((5,)).shape) == (5, 3) and tuple(d.sample().shape) == (3,)
        e = d.expand((2, 3))
        assert tuple(e.sample((4,)).shape) == (4, 2, 3)
        support = d.enumerate_support()
        return (d.logits, d.probs, d.probs.sum(-1), support, d.enumerate_support(expand=False), d.log_prob(support),
                e.log_prob(_t(lib, np.zeros((2, 3), np.float32))))
    _both(program)


def test_enumerate_support_and_expand_match_torch():
    X = _normal(1, 1, 2, 3)

    def program(lib):
        b = lib.distributions.Bernoulli(_t(lib, PROBS))
        o = lib.distributions.OneHotCategorical(_t(lib, WEIGHTS))
        n = lib.distributions.Normal(_t(lib, LOC[:, 0]), 1.0).expand((2, 3))
        x = _t(lib, X[0, 0, :2, :3])
        return (b.enumerate_support(), b.log_prob(b.enumerate_support()), o.enumerate_support(expand=False),
                o.log_prob(o.enumerate_support()), n.log_prob(x), n.mean, b.expand((2, 3, 4)).mean)
    _both(program)


@pytest.mark.x32_only
def test_repr():
    D = aotjax.distributions
    assert repr(D.Normal(0.0, 1.0)) == repr(torch.distributions.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"
    assert repr(D.Normal(aotjax.zeros(2), 1.0)) == "Normal(loc: (2,), scale: (2,))"
    assert repr(D.Independent(D.Bernoulli(logits=aotjax.zeros(3)), 1)) == "Independent(Bernoulli(logits: (3,)), 1)"


@pytest.mark.x32_only
def test_constraints_check_as_torchs():
    value = np.float32([[-1.0, 0.0, 0.5, 1.0], [0.25, 0.25, 0.5, 0.0]])

    def program(lib):
        c = lib.distributions.constraints
        return tuple(k.check(_t(lib, value)) for k in (c.real, c.positive, c.nonnegative, c.unit_interval, c.boolean,
                                                       c.simplex, c.interval(0.0, 0.5), c.nonnegative_integer,
                                                       c.real_vector, c.one_hot, c.independent(c.positive, 1)))
    _both(program)


# -- programs: a policy gradient, a VAE loss, transforms ---------------------------------------------------------------
def test_reinforce_loss_gradient_matches_torch():
    logits, advantages, actions = _normal(6, 4), _normal(6), [0, 3, 1, 1, 2, 3]

    def program(lib):
        theta = lib.tensor(logits, requires_grad=True)
        dist = lib.distributions.Categorical(logits=theta)
        loss = -(dist.log_prob(lib.tensor(actions)) * _t(lib, advantages)).mean() - 0.01 * dist.entropy().mean()
        loss.backward()
        return loss, theta.grad
    _both(program)


def test_vae_loss_gradient_matches_torch_given_the_same_noise():
    mu_np, sigma_np = _normal(3, 2), _uniform(3, 2, low=0.5, high=1.5)
    mu, sigma = aotjax.tensor(mu_np, requires_grad=True), aotjax.tensor(sigma_np, requires_grad=True)
    D = aotjax.distributions
    z = D.Normal(mu, sigma).rsample()
    loss = (z ** 2).sum() + D.kl_divergence(D.Normal(mu, sigma), D.Normal(0.0, 1.0)).sum()
    loss.backward()
    eps = torch.tensor((_np(z) - mu_np) / sigma_np)  # the noise aotjax drew, given to torch
    tmu, tsigma = torch.tensor(mu_np, requires_grad=True), torch.tensor(sigma_np, requires_grad=True)
    tz = tmu + tsigma * eps
    tloss = (tz ** 2).sum() + torch.distributions.kl_divergence(torch.distributions.Normal(tmu, tsigma),
                                                                torch.distributions.Normal(0.0, 1.0)).sum()
    tloss.backward()
    _close((loss, mu.grad, sigma.grad), (tloss, tmu.grad, tsigma.grad), rtol=1e-4, atol=1e-5)


def test_jit_grad_and_vmap_through_log_prob():
    loc, scale, x = _normal(4), _uniform(4, low=0.5, high=2.0), _normal(3, 4)
    D = aotjax.distributions

    def f(loc, scale, x):
        return D.Normal(loc, scale).log_prob(x)
    args = [aotjax.tensor(a) for a in (loc, scale, x)]
    _close(aotjax.jit(f)(*args), f(*args))

    tloc = torch.tensor(loc, requires_grad=True)
    torch.distributions.Normal(tloc, torch.tensor(scale)).log_prob(torch.tensor(x)).sum().backward()
    _close(aotjax.grad(lambda loc: f(loc, args[1], args[2]).sum())(args[0]), tloc.grad)

    per_row = aotjax.vmap(lambda x: f(args[0], args[1], x).sum())(args[2])
    _close(per_row, f(*args).sum(-1))


@asks_for_64_bits
def test_float64_parameters_keep_their_dtype():
    def program(lib):
        d = lib.distributions.Normal(lib.tensor(LOC.astype(np.float64)), 2.0)
        return d.log_prob(lib.tensor(LOC.astype(np.float64))), d.entropy(), d.rsample((2,)) * 0
    _both(program)


def test_bfloat16_probabilities_give_torchs_logits():
    def logits(lib):
        probs = lib.tensor([0.25, 0.75]).to(lib.bfloat16)
        return (lib.distributions.Categorical(probs=probs).logits.float(),
                lib.distributions.Bernoulli(probs=probs).logits.float())
    for ours, theirs in zip(logits(aotjax), logits(torch)):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-2)
