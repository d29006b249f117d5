"""The boundary: every program gives the same outputs, input effects and aliasing run eagerly, under
functionalize, under jit (first and cached calls), and through the functionalized jaxpr interpreted.

Aliasing is checked by behaviour: after the call, each output is written in place in turn, and after
each write every observed tensor (inputs, their bases, outputs) must hold what it holds in eager.
"""
from __future__ import annotations

import numpy as np
import pytest

import aotjax
from tests.helpers import check_boundary_agrees


def _arange(*shape):
    return aotjax.tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1)


def _a(): return (_arange(2, 3),), []
def _abc(): return (_arange(2, 3), _arange(2, 3) * 10, _arange(2, 3) * 100), []
def _square(): return (_arange(3, 3), _arange(3, 3) * 10), []
def _col(): return (_arange(3, 1),), []
def _sq1(): return (_arange(3, 3),), []


def _strided():
    base = _arange(6, 3)
    return (base[0::2],), [base]


def _same_view_twice():
    x = _arange(2, 3)
    return (x[0], x[0]), [x]


def _view_and_base():
    x = _arange(2, 3)
    return (x[0], x), [x]


def _flat_views():
    x = _arange(2, 3)
    return (x.view(-1), x.view(-1)), [x]


def _same_object():
    x = _arange(3, 3)
    return (x, x), []


def _index():
    return (_arange(4, 3), aotjax.tensor([2, 0]), _arange(2, 3) * 10), []


def _p_detach(a):
    tmp = a.detach()
    a.mul_(2)
    return a, tmp


def _p_twin_views(a):
    out = a * 3
    return out.view(-1), out.view(-1)


def _p_view_and_base(a):
    out = a * 3
    return out.view(-1), out


def _p_three(a):
    o1, o2 = a * 3, a * 4
    return o1.view(-1), o2.t(), o1.t()


def _p_meta_then_views(a):
    a.transpose_(1, 0)
    tmp = a.mul(2)
    return tmp.squeeze(), tmp.transpose(1, 0), a.unsqueeze(0)


def _p_meta_twice(x, y):
    x.t_()
    y.unsqueeze_(0)
    return x + y


def _p_setitem(a, b):
    a[0] = b[1]
    return a * 2


def _p_intermediate(a):
    b = a * 2
    b[1:].mul_(3)
    return b


def _p_clone_squeeze(a):
    b = a.clone().squeeze(-1)
    b.add_(1)
    return a + b


def _p_index_put(a, idx, v):
    a.index_put_((idx,), v)
    return a.sum(0)


def _p_t_then_write(a):
    a.t_()
    a[0].mul_(2)
    return a.view(a.shape)


PROGRAMS = [
    ("mul_then_new", lambda a: (a.mul_(2), a * 3)[1], _a),
    ("mul_returns_input", lambda a: a.mul_(2), _a),
    ("two_mutations", lambda a, b, c: (a.mul_(2), c.mul_(2), a + b + c)[2], _abc),
    ("transpose_", lambda a, b: (a.transpose_(1, 0), a + b)[1], _square),
    ("t_then_write", _p_t_then_write, _sq1),
    ("view_of_input", lambda a: a.view(-1), _a),
    ("write_then_view", lambda a: (a.add_(1), a.view(-1))[1], _a),
    ("same_output_twice", lambda a, b, c: (a, b, a), _abc),
    ("twin_intermediate_views", _p_twin_views, _a),
    ("view_and_its_base", _p_view_and_base, _a),
    ("three_views_two_bases", _p_three, _a),
    ("metadata_then_views", _p_meta_then_views, _a),
    ("strided_input", lambda a: (a.add_(1), a * 2)[1], _strided),
    ("aliased_same_view", lambda a, b: (a.add_(1), a + b)[1], _same_view_twice),
    ("aliased_view_and_base", lambda a, b: (a.add_(1), a + b)[1], _view_and_base),
    ("aliased_flat_views", lambda a, b: (a.add_(1), b.view(b.shape))[1], _flat_views),
    ("same_object_twice", _p_meta_twice, _same_object),
    ("write_into_intermediate", _p_intermediate, _a),
    ("setitem", _p_setitem, _square),
    ("index_put_", _p_index_put, _index),
    ("clone_squeeze_write", _p_clone_squeeze, _col),
    ("detach_sees_write", _p_detach, _a),
]


@pytest.mark.parametrize("name,f,make", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_program_agrees_everywhere(name, f, make):
    jitted = check_boundary_agrees(f, make)
    assert jitted.trace_count == 1  # the cached call did not trace again


@pytest.mark.parametrize("name,f,make", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_functionalized_jaxpr_is_pure(name, f, make):
    jaxpr = aotjax.jit(f).lower(*make()[0]).jaxpr
    for eqn in jaxpr.eqns:
        assert eqn.primitive.kind.value != "mutation", eqn.primitive


def test_write_through_view_becomes_scatter_of_base():
    def f(x):
        x.t()[0].add_(1)
        return x

    jaxpr = aotjax.jit(f).lower(aotjax.ones(2, 3)).jaxpr
    names = [e.primitive.name for e in jaxpr.eqns]
    assert names == ["permute", "select", "add", "select_scatter", "permute"], names


def test_metadata_mutation_leaves_data_alone():
    def f(x):
        x.t_()
        return x.sum()

    lowered = aotjax.jit(f).lower(aotjax.ones(2, 3))
    assert [e.primitive.name for e in lowered.jaxpr.eqns] == ["permute", "reduce_sum"]  # reads the new view
    assert not lowered.meta.mutated and len(lowered.meta.metadata) == 1
    assert len(lowered.jaxpr.jaxpr.outvars) == 1  # no data is written back
