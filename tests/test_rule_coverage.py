"""Every primitive against what its declaration and kind require, so holes are found before users find them:
a recompute class and a cost rule (what the min-cut partitioner reads), a jvp rule, a transpose rule where
it is declared linear, what a mutation writes. And the partitioner reading those declarations: a new
elementwise primitive is recomputed with no other registration; FLOPs come from the declared cost rule.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import aotjax  # noqa: F401  (imports every op family, so all primitives are registered)
from aotjax.core import primitive as primitive_module
from aotjax.core.ir import dce_rules
from aotjax.core.primitive import Kind, Recompute, all_primitives
from aotjax.interpreters.jvp import defjvp, jvp_rules
from aotjax.interpreters.lowering import lowering_rules
from aotjax.interpreters.partial_eval import partial_eval_rules
from aotjax.interpreters.transpose import transpose_rules
from aotjax.ops.base.combinators import elementwise
from aotjax.partition import min_cut_partition
from aotjax.partition.min_cut import flops
from tests.op_records import RECORDS, records

# Linear primitives whose transpose is not checked by the dot-product test of an op record (tests/op_records.py,
# `linear`), and where it is checked instead.
TRANSPOSE_TESTED_ELSEWHERE = {
    "detach": "its cotangent is zero by design: test_transpose.py::test_detach_has_a_zero_cotangent",
    "checkpoint": "transposed through its body: tests/test_checkpoint.py",
    "linspace_ends_jvp": "never in a linear program: an integer `linspace`'s results have no tangent",
    "aot_lin": "its transpose is the compiled backward: tests/test_aot.py",
    "custom_lin": "its transpose is the user's bwd: tests/test_custom_derivatives.py",
    "scan": "transposed through its body: tests/test_scan.py (the dot-product test of a linear scan)",
    "while": "its transpose raises JAX's error (no residuals for an unknown trip count): tests/test_while_loop.py",
    "cond": "transposed through its branches: tests/test_cond.py (the dot-product test of a linear cond)",
    "psum": "transposed only inside a named vmap: tests/test_vmap_collectives.py (its dot-product test)",
    "all_gather": "transposed inside a named vmap or a shard_map: tests/test_shard_map.py (dot-product tests)",
    "psum_scatter": "transposed inside a named vmap or a shard_map: tests/test_shard_map.py (dot-product tests)",
    "ppermute": "transposed inside a named vmap or a shard_map: tests/test_shard_map.py (dot-product tests)",
    "shard_map": "transposed through its body: tests/test_shard_map.py (a dot-product test; grads against jax's)",
}


def _names(prims) -> list[str]:
    return sorted(p.name for p in prims)


@contextlib.contextmanager
def _scratch_registry():
    """Primitives created inside are registered in a copy of the registry, dropped on exit, so that they
    never reach `all_primitives()` in other tests."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(primitive_module, "_registry", list(primitive_module._registry))
        yield


@pytest.fixture
def scratch_registry():
    with _scratch_registry():
        yield


# -- declarations -----------------------------------------------------------------------------------------
def test_every_primitive_declares_a_recompute_class():
    missing = [p for p in all_primitives() if not isinstance(p.recompute, Recompute)]
    assert not missing, f"primitives without a recompute class (Primitive(recompute=...)): {_names(missing)}"


def test_every_primitive_declares_a_cost_rule():
    missing = [p for p in all_primitives() if not callable(p.flops)]
    assert not missing, f"primitives without a cost rule (Primitive(flops=...)): {_names(missing)}"


def test_every_functional_and_view_primitive_has_a_jvp_rule():
    missing = [p for p in all_primitives() if p.kind is not Kind.MUTATION and p not in jvp_rules]
    assert not missing, f"primitives without a jvp rule: {_names(missing)}"


def test_every_primitive_declared_linear_has_a_transpose_rule():
    missing = [p for p in all_primitives() if p.linear and p not in transpose_rules]
    assert not missing, f"primitives declared linear without a transpose rule: {_names(missing)}"


def test_every_primitive_with_a_transpose_rule_is_declared_linear():
    undeclared = [p for p in transpose_rules if not p.linear]
    assert not undeclared, (f"primitives with a hand-written transpose rule that do not declare the operands they "
                            f"are linear in (Primitive(linear=...)): {_names(undeclared)}")


def test_every_higher_order_primitive_has_every_rule():
    """A primitive carrying sub-programs (loops, branches, checkpointed regions) needs, besides abstract evaluation,
    lowering and jvp, its own partial-evaluation rule (how grad and aot split it) and DCE rule (what of its body
    its users read), and a transpose rule where it is declared linear."""
    higher = [p for p in all_primitives() if p.higher_order]
    assert {"scan", "checkpoint"} <= {p.name for p in higher}
    for p in higher:
        rules = {"abstract eval": p.abstract_eval is not None, "lowering": p in lowering_rules, "jvp": p in jvp_rules,
                 "partial eval": p in partial_eval_rules, "dce": p in dce_rules,
                 "transpose": not p.linear or p in transpose_rules}
        missing = [name for name, ok in rules.items() if not ok]
        assert not missing, f"higher-order primitive '{p.name}' has no {', '.join(missing)} rule"


def test_every_linear_primitive_has_a_dot_product_test():
    tested = {r.prim for r in records(linear=True)}
    linear = {p.name for p in all_primitives() if p.linear}
    untested = sorted(linear - tested - set(TRANSPOSE_TESTED_ELSEWHERE))
    assert not untested, f"linear primitives without an op record transposing them (tests/op_records.py): {untested}"
    assert set(TRANSPOSE_TESTED_ELSEWHERE) <= linear
    assert tested <= linear, f"op records transposing primitives not declared linear: {sorted(tested - linear)}"


def test_op_records_have_unique_names_and_are_each_used():
    names = [r.name for r in RECORDS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    unused = [r.name for r in RECORDS if r.numpy is None and r.jax is None and not r.linear]
    assert not unused, f"op records that no test reads (no numpy, no jax reference, not linear): {unused}"
    assert all(r.prim for r in records(linear=True)), "a record declared linear names the primitive it transposes"


def test_every_mutation_declares_what_it_writes_and_its_functional_form():
    for p in all_primitives():
        if p.kind is not Kind.MUTATION:
            continue
        assert p.mutates, f"mutation primitive '{p.name}' declares no operand it writes"
        if p.is_metadata_mutation:
            assert p.metadata_view.kind is Kind.VIEW, f"'{p.name}': metadata_view {p.metadata_view} is not a view"
        else:
            assert p.functional is not None and p.functional.kind is Kind.FUNCTIONAL, (
                f"mutation primitive '{p.name}' declares no functional form (Primitive(functional=...))")
        computes = p.functional or p.metadata_view
        assert (p.recompute, p.flops) == (computes.recompute, computes.flops), p.name


def test_views_are_cheap_and_random_draws_never_recomputed():
    assert all(p.recompute is Recompute.CHEAP for p in all_primitives() if p.kind is Kind.VIEW)
    random = [p for p in all_primitives() if p.name.startswith("random_")]
    assert random and all(p.recompute is Recompute.NEVER for p in random), _names(random)


# -- the partitioner reads the declarations ---------------------------------------------------------------
def _scratch_cube():
    """A new elementwise primitive, declared the way an op family declares one: no other registration."""
    cube_p = elementwise("scratch_cube", lambda x: x * x * x)
    defjvp(cube_p, lambda t, x: t * 3.0 * x * x)
    return cube_p


def test_a_new_elementwise_primitive_is_recomputed_by_min_cut(scratch_registry, monkeypatch):
    cube_p = _scratch_cube()
    assert cube_p.recompute is Recompute.CHEAP and callable(cube_p.flops) and cube_p in jvp_rules  # complete

    def f(x):
        return cube_p.bind(cube_p.bind(x)).sum()  # the backward reads x and cube(x)

    x = aotjax.tensor(np.linspace(0.5, 1.5, 1000).astype(np.float32))
    lowered = aotjax.aot(f, partition=min_cut_partition()).lower(x)
    assert [r.why for r in lowered.residuals] == ["argument x"]
    assert lowered.residual_bytes == 4000
    np.testing.assert_allclose(aotjax.grad(aotjax.aot(f, partition=min_cut_partition()))(x).numpy(),
                               9 * x.numpy() ** 8, rtol=1e-5)
    monkeypatch.setattr(cube_p, "recompute", Recompute.EXPENSIVE)  # declared expensive: its result is saved
    saved = aotjax.aot(f, partition=min_cut_partition()).lower(x)
    assert saved.residual_bytes == 8000, [r.why for r in saved.residuals]


def test_scratch_primitives_leave_the_registry():
    with _scratch_registry():
        cube_p = _scratch_cube()
        assert cube_p in all_primitives()
    assert cube_p not in all_primitives()


def test_random_draws_are_saved_even_at_memory_budget_zero():
    def f(x, key):
        return (x * aotjax.random.normal(key, (1000,))).sin().sum()

    x, key = aotjax.ones(1000), aotjax.random.key(0)
    for budget in (1.0, 0.0):
        lowered = aotjax.aot(f, partition=min_cut_partition(budget)).lower(x, key)
        assert [r.why.split(" at ")[0] for r in lowered.residuals] == ["argument x", "random_normal"], budget


def _only_eqn(fn, *args, name: str):
    (eqn,) = [e for e in aotjax.make_jaxpr(fn)(*args).eqns if e.primitive.name == name]
    return eqn


@pytest.mark.parametrize("a_shape, b_shape, mnk", [
    ((3, 4), (4, 5), (3, 5, 4)),
    ((2, 3, 4), (4, 5), (2 * 3, 5, 4)),  # a batch of 2 products of [3, 4] @ [4, 5]
    ((4,), (4, 5), (1, 5, 4)),
    ((3, 4), (4,), (3, 1, 4)),
], ids=["matrix", "batched", "vector_matrix", "matrix_vector"])
def test_min_cut_counts_2mnk_flops_for_a_matmul(a_shape, b_shape, mnk):
    a, b = aotjax.ones(*a_shape), aotjax.ones(*b_shape)
    eqn = _only_eqn(lambda a, b: a @ b, a, b, name="matmul")
    m, n, k = mnk
    assert flops(eqn) == 2 * m * n * k


def test_min_cut_counts_2mnk_flops_for_an_einsum_product():
    a, b = aotjax.ones(3, 4), aotjax.ones(4, 5)
    eqn = _only_eqn(lambda a, b: aotjax.einsum("ij,jk->ik", a, b), a, b, name="einsum")
    assert flops(eqn) == 2 * 3 * 5 * 4


def test_elementwise_and_view_flops_count_the_output_elements():
    x = aotjax.ones(3, 4)
    assert flops(_only_eqn(lambda x: x.sin(), x, name="sin")) == 12
    assert flops(_only_eqn(lambda x: x[:, 1:3], x, name="slice")) == 6
    assert flops(_only_eqn(lambda x: x.sum(), x, name="reduce_sum")) == 12  # one per element read


def test_a_primitive_without_a_cost_rule_is_named(scratch_registry, monkeypatch):
    cube_p = _scratch_cube()
    monkeypatch.setattr(cube_p, "flops", None)
    eqn = _only_eqn(lambda x: cube_p.bind(x), aotjax.ones(2), name="scratch_cube")
    with pytest.raises(NotImplementedError, match="cost rule \\(flops\\) for primitive 'scratch_cube'"):
        flops(eqn)
