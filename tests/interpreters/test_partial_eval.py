"""The partial-evaluation interpreter: known parts are computed, the unknown part is recorded with the
known values it reads as residuals, and `eval_jaxpr(unknown, *residuals, *unknowns)` completes it."""
from __future__ import annotations

import numpy as np
import pytest

import aotjax
from aotjax.core import UnsupportedError, eval_jaxpr
from aotjax.core.primitive import all_primitives
from aotjax.interpreters.partial_eval import PartialVal, partial_eval_flat, partial_eval_rules

K, U = PartialVal.known, PartialVal.unknown


def f64(*values):
    return aotjax.tensor(np.array(values, np.float64))


def names(jaxpr) -> list[str]:
    return [e.primitive.name for e in jaxpr.eqns]


def test_known_parts_are_computed_and_the_rest_recorded():
    x, y = f64(0.5, 1.0, 2.0), f64(3.0, -1.0, 4.0)

    def f(x, y):
        return [(x.sin() * y).exp() + x.cos(), x * 2.0]

    jaxpr, pvals_out, residuals = partial_eval_flat(f, [K(x), U(y.aval)])
    assert names(jaxpr) == ["mul", "exp", "add"]
    assert len(jaxpr.jaxpr.invars) == 3 and len(jaxpr.jaxpr.outvars) == 1
    assert [pv.is_known for pv in pvals_out] == [False, True]
    np.testing.assert_allclose(pvals_out[1].const.numpy(), x.numpy() * 2)
    np.testing.assert_allclose(residuals[0].numpy(), np.sin(x.numpy()))  # sin x, then cos x
    np.testing.assert_allclose(residuals[1].numpy(), np.cos(x.numpy()))
    (out,) = eval_jaxpr(jaxpr, *residuals, y)
    np.testing.assert_allclose(out.numpy(), f(x, y)[0].numpy())


def test_residuals_are_labelled_with_the_line_that_computed_them():
    x, y = f64(1.0, 2.0), f64(3.0, 4.0)

    def f(x, y):
        s = x.sin()
        return [s * y + x]

    jaxpr, _, residuals = partial_eval_flat(f, [K(x), U(y.aval)])
    sources = jaxpr.meta.residual_sources
    assert sources[0].primitive == "sin" and sources[0].source_info.function == "f"
    assert sources[1].primitive is None and sources[1].source_info is None  # the known input itself
    assert residuals[1] is x
    assert all(e.source_info is not None and e.source_info.function == "f" for e in jaxpr.eqns)


def test_scalars_are_literals_and_each_known_value_is_one_residual():
    x, y = f64(1.0, 2.0), f64(3.0, 4.0)
    jaxpr, _, residuals = partial_eval_flat(lambda x, y: [y * x + y * x - y * 2.0], [K(x), U(y.aval)])
    assert len(residuals) == 1 and residuals[0] is x
    assert len(jaxpr.jaxpr.invars) == 2


def test_unused_unknown_work_and_residuals_are_dropped():
    x, y = f64(1.0, 2.0), f64(3.0, 4.0)
    jaxpr, _, residuals = partial_eval_flat(lambda x, y: [(y * x.exp()).sum(), y * 3.0 + x.sin()][1:],
                                            [K(x), U(y.aval)])
    assert names(jaxpr) == ["mul", "add"]
    assert len(residuals) == 1
    np.testing.assert_allclose(residuals[0].numpy(), np.sin(x.numpy()))


def test_all_known_gives_an_empty_jaxpr():
    x = f64(1.0, 2.0)
    jaxpr, pvals_out, residuals = partial_eval_flat(lambda x: [x.sin()], [K(x)])
    assert jaxpr.eqns == [] and residuals == [] and jaxpr.jaxpr.outvars == []
    np.testing.assert_allclose(pvals_out[0].const.numpy(), np.sin(x.numpy()))


def test_instantiate_makes_known_outputs_unknown():
    x, y = f64(1.0, 2.0), f64(3.0, 4.0)
    jaxpr, pvals_out, residuals = partial_eval_flat(lambda x, y: [x.sin(), y, 2.0], [K(x), U(y.aval)],
                                                    instantiate=True)
    assert not any(pv.is_known for pv in pvals_out)
    out = eval_jaxpr(jaxpr, *residuals, y)
    np.testing.assert_allclose(out[0].numpy(), np.sin(x.numpy()))
    assert out[1] is y and float(out[2]) == 2.0


def test_views_of_unknown_values_are_recorded():
    x = aotjax.tensor(np.arange(6.0).reshape(2, 3))
    jaxpr, _, residuals = partial_eval_flat(lambda x: [x.t()[0] * 2.0, x[:, 1:].sum(0)], [U(x.aval)])
    assert names(jaxpr) == ["permute", "select", "mul", "slice", "reduce_sum"]
    out = eval_jaxpr(jaxpr, *residuals, x)
    np.testing.assert_allclose(out[0].numpy(), [0.0, 6.0])
    np.testing.assert_allclose(out[1].numpy(), [5.0, 7.0])


def test_under_an_outer_trace_the_known_part_is_staged_there():
    y = f64(3.0, 4.0)

    def outer(x):
        jaxpr, _, residuals = partial_eval_flat(lambda x, y: [x.exp() * y], [K(x), U(y.aval)])
        assert names(jaxpr) == ["mul"]
        return residuals

    outer_jaxpr = aotjax.make_jaxpr(outer)(f64(1.0, 2.0))
    assert names(outer_jaxpr) == ["exp"]


def test_in_place_writes_to_unknown_values_need_functionalize():
    x = f64(1.0, 2.0)
    with pytest.raises(UnsupportedError, match="mul_: partial evaluation of an in-place write"):
        partial_eval_flat(lambda x: [x.mul_(2.0)], [U(x.aval)])


def test_in_place_writes_to_known_values_run():
    x = f64(1.0, 2.0)
    jaxpr, pvals_out, _ = partial_eval_flat(lambda x: [x.clone().mul_(2.0)], [K(x)])
    np.testing.assert_allclose(pvals_out[0].const.numpy(), [2.0, 4.0])


def test_partial_eval_rules_replace_the_default_for_unknown_operands():
    assert isinstance(partial_eval_rules, dict)
    mul_p = next(p for p in all_primitives() if p.name == "mul")
    calls = []

    def rule(trace, tracers, **params):
        calls.append([t.pval.is_known for t in tracers])
        return trace.record(mul_p, tracers, params)

    partial_eval_rules[mul_p] = rule
    try:
        x, y = f64(1.0, 2.0), f64(3.0, 4.0)
        jaxpr, _, _ = partial_eval_flat(lambda x, y: [x * x * y], [K(x), U(y.aval)])
    finally:
        del partial_eval_rules[mul_p]
    assert calls == [[True, False]]  # (x * x) * y: not called for the all-known x * x
    assert names(jaxpr) == ["mul"]


def test_constants_made_from_nothing_are_made_again_not_saved():
    """A zero tensor a jvp rule instantiates is rebuilt in the tangent program, never a residual."""
    from aotjax.interpreters.jvp import jvp_flat
    from aotjax.ops.shape.views import select_scatter_p

    x = f64(1.0, 2.0, 3.0)
    src = aotjax.full((2,), 5.0, dtype=aotjax.float64)  # a constant: its tangent is a symbolic zero

    def f_jvp(x, t):
        p, tan = jvp_flat(lambda x: [select_scatter_p.bind(x.sin().view(3, 1).expand(3, 2), src, dim=0, index=1)],
                          [x], [t])
        return [*p, *tan]

    jaxpr, _, residuals = partial_eval_flat(f_jvp, [K(x), U(x.aval)])
    assert [tuple(r.shape) for r in residuals] == [(3,)]  # cos(x) only, no zeros saved
    assert any(e.primitive.name == "full" and not e.inputs for e in jaxpr.eqns)  # the zeros are made again
