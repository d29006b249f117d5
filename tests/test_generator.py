"""The stateful generator: its state a key tensor each draw updates in place, so every transform threads it as
mutated state (the same seed gives the same numbers eagerly, under jit, aot, grad and checkpoint; consecutive compiled
calls and loop iterations draw anew), and vmap's `randomness` governs its draws, with torch's meanings."""
from __future__ import annotations

import numpy as np
import pytest

import aotjax
from tests.op_records import as_np


def _draws(f, *args):
    aotjax.manual_seed(7)
    return [as_np(f(*args)) for _ in range(2)]


def _noisy(x):
    return x * aotjax.rand(3) + aotjax.randn(3)


@pytest.mark.parametrize("transform", ["jit", "aot", "functionalize"])
def test_the_same_seed_draws_the_same_numbers_eagerly_and_compiled_and_calls_draw_anew(transform):
    x = aotjax.ones(3)
    eager = _draws(_noisy, x)
    compiled = getattr(aotjax, transform)(_noisy)
    got = _draws(compiled, x)
    for e, g in zip(eager, got, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-6)
    assert not np.allclose(got[0], got[1])  # the state advanced: the second call draws anew
    if transform == "jit":
        assert compiled.trace_count == 1


def test_a_generator_of_its_own_and_its_state():
    g = aotjax.Generator(3)
    a = aotjax.randint(0, 100, (5,), generator=g)
    state = g.get_state()
    b = aotjax.randint(0, 100, (5,), generator=g)
    g.set_state(state)
    assert aotjax.randint(0, 100, (5,), generator=g).tolist() == b.tolist() != a.tolist()
    assert g.initial_seed() == 3 and aotjax.Generator(3).manual_seed(3).initial_seed() == 3


def test_in_place_draws_and_their_statistics():
    aotjax.manual_seed(0)
    u = aotjax.empty(20000).uniform_(-1.0, 3.0)
    n = aotjax.zeros(20000).normal_(2.0, 0.5)
    b = aotjax.zeros(20000).bernoulli_(0.25)
    assert -1.0 <= float(u.min()) and float(u.max()) < 3.0 and abs(float(u.mean()) - 1.0) < 0.05
    assert abs(float(n.mean()) - 2.0) < 0.02 and abs(float(n.std()) - 0.5) < 0.02
    assert set(np.unique(as_np(b)).tolist()) <= {0.0, 1.0} and abs(float(b.mean()) - 0.25) < 0.02
    assert aotjax.rand_like(aotjax.zeros(2, 3, dtype=np.float32)).shape == (2, 3)


def test_each_scan_iteration_draws_anew():
    aotjax.manual_seed(1)
    _, ys = aotjax.scan(lambda c, _: (c, aotjax.rand(2)), aotjax.zeros(()), None, length=4)
    assert len({tuple(r) for r in as_np(ys).tolist()}) == 4


def test_dropout_under_grad_uses_the_eager_mask_and_checkpoint_replays_it():
    x = aotjax.ones(64)
    aotjax.manual_seed(5)
    eager = as_np(aotjax.dropout(x, 0.5)) * 0.5  # the mask the first draw after seeding makes
    for transform in (lambda f: f, aotjax.jit, aotjax.aot, aotjax.checkpoint,
                      lambda f: aotjax.checkpoint(f, policy=aotjax.checkpoint_policies.everything_saveable)):
        aotjax.manual_seed(5)
        g = aotjax.grad(lambda v, t=transform: t(lambda w: aotjax.dropout(w, 0.5) * 1.0)(v).sum())(x)
        np.testing.assert_array_equal(as_np(g) * 0.5, eager)


def test_vmap_randomness_error_same_and_different():
    xs = aotjax.zeros(4, 3)
    with pytest.raises(RuntimeError, match=r"vmap: rand draws from a random generator while vmap's randomness is "
                                           r"'error'.*test_generator.py"):
        aotjax.vmap(lambda x: x + aotjax.rand(3))(xs)
    same = as_np(aotjax.vmap(lambda x: x + aotjax.rand(3), randomness="same")(xs))
    assert (same == same[0]).all()
    for run in (lambda f: f, aotjax.jit):
        different = as_np(run(aotjax.vmap(lambda x: x + aotjax.rand(3), randomness="different"))(xs))
        assert len({tuple(r) for r in different.tolist()}) == 4
    nested = as_np(aotjax.vmap(aotjax.vmap(lambda x: x + aotjax.rand(()), randomness="different"),
                               randomness="same")(aotjax.zeros(2, 3)))
    assert (nested[0] == nested[1]).all() and len(set(nested[0].tolist())) == 3
    # explicit keys are not governed by randomness: a batched key draws per example
    keys = aotjax.random.split(aotjax.random.key(0), 4)
    per_key = as_np(aotjax.vmap(lambda k: aotjax.random.uniform(k, (2,)))(keys))
    assert len({tuple(r) for r in per_key.tolist()}) == 4


def test_per_example_dropout_masks_under_vmap_of_grad():
    f = aotjax.vmap(aotjax.grad(lambda x: aotjax.dropout(x, 0.5).sum()), randomness="different")
    aotjax.manual_seed(2)
    g = as_np(f(aotjax.ones(8, 16)))
    assert set(np.unique(g).tolist()) <= {0.0, 2.0} and len({tuple(r) for r in g.tolist()}) == 8
