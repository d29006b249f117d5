"""Programs mixing views and in-place ops: eval_jaxpr(make_jaxpr(f)) reproduces eager f exactly
(outputs and the arguments afterwards), because the as-written jaxpr has reference semantics."""
import numpy as np
import pytest

import aotjax
from tests.helpers import check_traced_matches_eager


def _t(*shape, seed=0):
    return aotjax.tensor(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


def p_mul_then_use(a):
    a.mul_(2)
    return a * 3


def p_return_input(a):
    a.mul_(2)
    return a


def p_two_mutated(a, b, c):
    a.mul_(2)
    c.mul_(2)
    return a + b + c


def p_metadata_then_add(a, b):
    a.transpose_(1, 0)
    return a + b.t()


def p_t_then_row(a):
    a.t_()
    a[0].mul_(2)
    return a.view(a.shape)


def p_chained_views(a):
    a.t()[1:, 0].add_(1)
    return a


def p_intermediate_write(a):
    b = a * 2
    b[1:].mul_(3)
    return b


def p_setitem(a, b):
    a[0] = b
    return a * 2


def p_index_put(a):
    idx = aotjax.tensor([0, 2])
    a.index_put_((idx,), aotjax.tensor(5.0))
    return a.sum()


def p_clone_squeeze(a):
    b = a.clone().squeeze(-1)
    b.add_(1)
    return a.squeeze(-1) + b


def p_detach_sees_mutation(a):
    tmp = a.detach()
    a.mul_(2)
    return a, tmp


def p_diagonal_write(a):
    a.diagonal().fill_(0)
    return a.relu()


def p_reshape_view_write(a):
    a.reshape(-1)[::2].zero_()
    return a


def p_sibling_views(a):
    r0, r1 = a.unbind(0)
    r0.copy_(r1)
    return a.sum(0)


def p_expand_read(a):
    return a.unsqueeze(0).expand(3, -1, -1).sum(0)


PROGRAMS = [
    (p_mul_then_use, [(2, 3)]),
    (p_return_input, [(4,)]),
    (p_two_mutated, [(2, 2), (2, 2), (2, 2)]),
    (p_metadata_then_add, [(2, 3), (2, 3)]),
    (p_t_then_row, [(2, 3)]),
    (p_chained_views, [(3, 4)]),
    (p_intermediate_write, [(4,)]),
    (p_setitem, [(3, 2), (2,)]),
    (p_index_put, [(4,)]),
    (p_clone_squeeze, [(3, 1)]),
    (p_detach_sees_mutation, [(3,)]),
    (p_diagonal_write, [(3, 3)]),
    (p_reshape_view_write, [(2, 3)]),
    (p_sibling_views, [(2, 3)]),
    (p_expand_read, [(2, 3)]),
]


@pytest.mark.parametrize("f,shapes", PROGRAMS, ids=lambda p: getattr(p, "__name__", ""))
def test_traced_program_matches_eager(f, shapes):
    args = [_t(*s, seed=i) for i, s in enumerate(shapes)]
    check_traced_matches_eager(f, *args)


def test_as_written_jaxpr_shows_views_and_writes():
    closed = aotjax.make_jaxpr(p_chained_views)(_t(3, 4))
    names = [e.primitive.name for e in closed.eqns]
    assert names[0] == "permute" and names[-1] == "add_"
