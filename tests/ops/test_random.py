"""aotjax.random: the same key gives the same values eagerly, traced, lowered and through jax.random."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import DTypeError, ShapeError
from tests.helpers import FLOAT, INT, asks_for_64_bits, check_traced_matches_eager

R = aotjax.random

# name, aotjax sampler of a key, jax.random reference on the same raw key, expected dtype
SAMPLERS = [
    ("uniform", lambda k: R.uniform(k, (3, 4)), lambda k: jax.random.uniform(k, (3, 4), jnp.float32), np.float32),
    ("uniform_bounds", lambda k: R.uniform(k, (5,), low=-2.0, high=3.0),
     lambda k: jax.random.uniform(k, (5,), jnp.float32, -2.0, 3.0), np.float32),
    ("uniform_f64", lambda k: R.uniform(k, 4, dtype=aotjax.float64), lambda k: jax.random.uniform(k, (4,)), FLOAT),
    ("uniform_scalar", lambda k: R.uniform(k), lambda k: jax.random.uniform(k, (), jnp.float32), np.float32),
    ("normal", lambda k: R.normal(k, (2, 3)), lambda k: jax.random.normal(k, (2, 3), jnp.float32), np.float32),
    ("normal_bf16", lambda k: R.normal(k, (4,), dtype=aotjax.bfloat16),
     lambda k: jax.random.normal(k, (4,), jnp.bfloat16), aotjax.bfloat16),
    ("randint", lambda k: R.randint(k, (6,), 0, 10), lambda k: jax.random.randint(k, (6,), 0, 10, INT), INT),
    ("randint_i32", lambda k: R.randint(k, (2, 2), -5, 5, dtype=aotjax.int32),
     lambda k: jax.random.randint(k, (2, 2), -5, 5, jnp.int32), np.int32),
    ("bernoulli", lambda k: R.bernoulli(k, 0.3, (8,)), lambda k: jax.random.bernoulli(k, jnp.float32(0.3), (8,)),
     np.bool_),
    ("bernoulli_default", lambda k: R.bernoulli(k), lambda k: jax.random.bernoulli(k, jnp.float32(0.5)), np.bool_),
    ("split", lambda k: R.split(k), lambda k: jax.random.split(k), np.uint32),
    ("split3", lambda k: R.split(k, 3), lambda k: jax.random.split(k, 3), np.uint32),
    ("fold_in", lambda k: R.fold_in(k, 7), lambda k: jax.random.fold_in(k, 7), np.uint32),
]


@pytest.fixture(params=[0, 123456789])
def seed(request):
    return request.param


@asks_for_64_bits
@pytest.mark.parametrize("name,sample,ref,dtype", SAMPLERS, ids=[c[0] for c in SAMPLERS])
def test_matches_jax_random(name, sample, ref, dtype, seed):
    key = R.key(seed)
    out = sample(key)
    expected = np.asarray(ref(jax.random.PRNGKey(seed)))
    assert out.dtype == np.dtype(dtype) and out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)
    np.testing.assert_array_equal(sample(key).numpy(), expected)  # deterministic


@asks_for_64_bits
@pytest.mark.parametrize("name,sample,ref,dtype", SAMPLERS, ids=[c[0] for c in SAMPLERS])
def test_traced_and_lowered_match_eager(name, sample, ref, dtype):
    key = R.key(3)
    eager, jaxpr = check_traced_matches_eager(sample, key, rtol=0, atol=0)
    assert jaxpr.jaxpr.eqns[-1].primitive.name.startswith("random_")
    assert jaxpr.consts == []
    lowered = jax.jit(aotjax.to_jax(jaxpr))(jax.random.PRNGKey(3))
    np.testing.assert_array_equal(np.asarray(lowered), eager.numpy())


def test_key_matches_prngkey():
    for seed in (0, 1, 42, 2**31 - 1, 2**40 + 5):
        k = R.key(seed)
        assert k.dtype == np.uint32 and k.shape == (2,)
        np.testing.assert_array_equal(k.numpy(), np.asarray(jax.random.PRNGKey(seed)))


def test_key_is_staged():
    jaxpr = aotjax.make_jaxpr(lambda: R.normal(R.key(5), (2,)))()
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == ["random_seed", "random_normal"]
    (out,) = aotjax.eval_jaxpr(jaxpr)
    np.testing.assert_array_equal(out.numpy(), np.asarray(jax.random.normal(jax.random.PRNGKey(5), (2,),
                                                                            jnp.float32)))


def test_traced_seed():
    jaxpr = aotjax.make_jaxpr(lambda s: R.uniform(R.key(s), (3,)))(aotjax.tensor(9))
    (out,) = aotjax.eval_jaxpr(jaxpr, aotjax.tensor(9))
    np.testing.assert_array_equal(out.numpy(), np.asarray(jax.random.uniform(jax.random.PRNGKey(9), (3,),
                                                                             jnp.float32)))


def test_unpacked_split_keys_match_jax():
    k1, k2 = R.split(R.key(0))
    j1, j2 = jax.random.split(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(R.normal(k2, (3,)).numpy(), np.asarray(jax.random.normal(j2, (3,), jnp.float32)))
    np.testing.assert_array_equal(R.normal(k1, (3,)).numpy(), np.asarray(jax.random.normal(j1, (3,), jnp.float32)))


def test_jax_keys_accepted():
    raw = jax.random.PRNGKey(4)
    np.testing.assert_array_equal(R.normal(raw, (2,)).numpy(), np.asarray(jax.random.normal(raw, (2,), jnp.float32)))
    typed = jax.random.key(4)
    np.testing.assert_array_equal(R.normal(typed, (2,)).numpy(), np.asarray(jax.random.normal(raw, (2,),
                                                                                                jnp.float32)))


def test_bernoulli_tensor_p():
    p = np.array([0.0, 1.0, 0.5, 0.9], np.float32)
    out = R.bernoulli(R.key(1), aotjax.tensor(p))
    assert out.shape == (4,) and out.dtype == np.bool_
    np.testing.assert_array_equal(out.numpy(), np.asarray(jax.random.bernoulli(jax.random.PRNGKey(1), p)))
    assert out.numpy()[0] == False and out.numpy()[1] == True  # noqa: E712
    out2 = R.bernoulli(R.key(1), aotjax.tensor(p), (3, 4))
    np.testing.assert_array_equal(out2.numpy(), np.asarray(jax.random.bernoulli(jax.random.PRNGKey(1), p, (3, 4))))
    check_traced_matches_eager(lambda k, p: R.bernoulli(k, p, (2, 4)), R.key(2), aotjax.tensor(p))


def test_statistics():
    x = R.normal(R.key(0), (20000,)).numpy()
    assert abs(x.mean()) < 0.05 and abs(x.std() - 1) < 0.05
    u = R.uniform(R.key(0), (20000,), low=1.0, high=2.0).numpy()
    assert u.min() >= 1.0 and u.max() < 2.0 and abs(u.mean() - 1.5) < 0.02
    r = R.randint(R.key(0), (1000,), 3, 6).numpy()
    assert set(r.tolist()) == {3, 4, 5}


def test_errors():
    with pytest.raises(DTypeError, match="uniform: the key must be a u32\\[2\\] tensor"):
        R.uniform(aotjax.ones(2), (3,))
    with pytest.raises(DTypeError, match="split: the key must be a u32\\[2\\]"):
        R.split(aotjax.tensor(np.zeros(3, np.uint32)))
    with pytest.raises(DTypeError, match="normal: dtype must be a floating-point dtype"):
        R.normal(R.key(0), (2,), dtype=aotjax.int32)
    with pytest.raises(DTypeError, match="randint: dtype must be an integer dtype"):
        R.randint(R.key(0), (2,), 0, 3, dtype=aotjax.float32)
    with pytest.raises(ShapeError, match="bernoulli: p of shape \\[3\\] does not broadcast to shape \\[2\\]"):
        R.bernoulli(R.key(0), aotjax.ones(3), (2,))
    with pytest.raises(TypeError, match="uniform: shape must be a tuple of ints"):
        R.uniform(R.key(0), (2.0,))
    with pytest.raises(DTypeError, match="random_seed: the seed must be a scalar integer"):
        R.key(aotjax.ones(()))
