"""Hypothesis-generated programs of views, in-place ops and returns: eager and eval_jaxpr(make_jaxpr)
agree on outputs and on the arguments afterwards. Hypothesis-generated indices, in range or not: eager
raises where PyTorch raises, and a checked jit raises the same."""
import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aotjax
from tests.helpers import check_boundary_agrees, check_traced_matches_eager

# Each step acts on live tensor number `i` (mod the number live); views and results join the pool.
VIEW_STEPS = ["t", "row", "col_slice", "unsqueeze", "flatten_view", "diagonal", "detach", "expand_read"]
WRITE_STEPS = ["add_", "mul_", "zero_", "copy_from", "setitem_row", "t_", "unsqueeze_squeeze_"]
VALUE_STEPS = ["mul_add", "clone", "sin"]

step = st.tuples(st.sampled_from(VIEW_STEPS + WRITE_STEPS + VALUE_STEPS), st.integers(0, 7), st.integers(0, 7))


def _apply(pool, name, i, j):
    x = pool[i % len(pool)]
    y = pool[j % len(pool)]
    if name == "t" and x.ndim == 2:
        pool.append(x.t())
    elif name == "row" and x.ndim >= 1 and x.shape[0] > 0:
        pool.append(x[j % x.shape[0]])
    elif name == "col_slice" and x.ndim == 2:
        pool.append(x[:, j % 2::2])
    elif name == "unsqueeze" and x.ndim < 3:
        pool.append(x.unsqueeze(j % (x.ndim + 1)))
    elif name == "flatten_view" and x.is_contiguous():
        pool.append(x.view(-1))
    elif name == "diagonal" and x.ndim == 2:
        pool.append(x.diagonal())
    elif name == "detach":
        pool.append(x.detach())
    elif name == "expand_read" and x.ndim >= 1:
        pool.append(x.unsqueeze(0).expand(2, *x.shape).sum(0))
    elif name == "add_":
        x.add_(j * 0.5)
    elif name == "mul_":
        x.mul_(1.0 + j * 0.25)
    elif name == "zero_":
        x.zero_()
    elif name == "copy_from" and y.shape == x.shape and y is not x:
        x.copy_(y)
    elif name == "setitem_row" and x.ndim >= 1 and x.shape[0] > 0:
        x[j % x.shape[0]] = float(j)
    elif name == "t_" and x.ndim == 2:
        x.t_()
    elif name == "unsqueeze_squeeze_" and x.ndim < 3:
        x.unsqueeze_(0)
        x.squeeze_(0)
    elif name == "mul_add":
        pool.append(x * 2 + y.sum())
    elif name == "clone":
        pool.append(x.clone())
    elif name == "sin":
        pool.append(x.sin())


def make_program(steps, n_out):
    def program(a, b):
        pool = [a, b]
        for s in steps:
            _apply(pool, *s)
        return tuple(pool[-(k + 1) % len(pool)] for k in range(n_out))

    return program


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=10), n_out=st.integers(1, 3))
def test_random_programs_trace_like_eager(steps, n_out):
    rng = np.random.default_rng(0)
    a = aotjax.tensor(rng.normal(size=(3, 4)).astype(np.float32))
    b = aotjax.tensor(rng.normal(size=(4,)).astype(np.float32))
    check_traced_matches_eager(make_program(steps, n_out), a, b, rtol=1e-5, atol=1e-5)


def _make_inputs(aliased: bool):
    """`(a, b)` fresh: independent, or both views of one base (then the base is observed too)."""
    rng = np.random.default_rng(0)
    if aliased:
        base = aotjax.tensor(rng.normal(size=(4, 4)).astype(np.float32))
        return (base[:3], base[3]), [base]
    a = aotjax.tensor(rng.normal(size=(3, 4)).astype(np.float32))
    b = aotjax.tensor(rng.normal(size=(4,)).astype(np.float32))
    return (a, b), []


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=8), n_out=st.integers(1, 3), aliased=st.booleans())
def test_random_programs_agree_through_the_boundary(steps, n_out, aliased):
    """Eager, functionalize, jit (first and cached call) and the functionalized jaxpr interpreted agree
    on outputs, on the inputs afterwards and on aliasing (outputs written after the call)."""
    check_boundary_agrees(make_program(steps, n_out), lambda: _make_inputs(aliased), rtol=1e-5, atol=1e-5)


# -- indices in range or not ---------------------------------------------------------------------------------
def _setitem(x, i):
    x[i] = 9.0
    return x


# Ops taking an index vector of 3 entries, on aotjax tensors and the same in PyTorch; `x` is [3, 4] (some write it).
INDEX_OPS = {
    "getitem": (lambda x, i: x[i], lambda x, i: x[i]),
    "getitem_dim1": (lambda x, i: x[:, i], lambda x, i: x[:, i]),
    "setitem": (_setitem, _setitem),
    "index_put_acc": (lambda x, i: x.index_put_((i,), aotjax.tensor(np.float32(1)), accumulate=True),
                      lambda x, i: x.index_put_((i,), torch.tensor(1.0), accumulate=True)),
    "index_select": (lambda x, i: x.index_select(1, i), lambda x, i: x.index_select(1, i)),
    "index_add_": (lambda x, i: x.index_add_(0, i, aotjax.ones(3, 4)),
                   lambda x, i: x.index_add_(0, i, torch.ones(3, 4))),
    "gather": (lambda x, i: x.gather(1, i.reshape(1, 3)), lambda x, i: x.gather(1, i.reshape(1, 3))),
    "scatter_add": (lambda x, i: x.scatter_add(1, i.reshape(1, 3), aotjax.ones(1, 3)),
                    lambda x, i: x.scatter_add(1, i.reshape(1, 3), torch.ones(1, 3))),
    "embedding": (lambda x, i: aotjax.nn.functional.embedding(i, x), lambda x, i: torch.nn.functional.embedding(i, x)),
    "cross_entropy": (lambda x, i: aotjax.nn.functional.cross_entropy(x, i, reduction="none"),
                      lambda x, i: torch.nn.functional.cross_entropy(x, i, reduction="none")),
}
CHECKED = {name: aotjax.jit(fn, checks=True) for name, (fn, _) in INDEX_OPS.items()}  # one program per op
X_INDEXED = np.arange(12, dtype=np.float32).reshape(3, 4) / 4


def _outcome(fn, x, index):
    """`fn`'s result (after it, `x`), or the IndexError/RuntimeError it raised."""
    try:
        out = fn(x, index)
    except (IndexError, RuntimeError) as e:
        return e
    return out.numpy().copy(), x.numpy().copy()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(sorted(INDEX_OPS)),
       entries=st.lists(st.integers(0, 2) | st.integers(-9, 9), min_size=3, max_size=3))  # in range everywhere, or any
def test_random_indices_raise_like_torch_eagerly_and_in_a_checked_jit(op, entries):
    fn, torch_fn = INDEX_OPS[op]
    index = np.array(entries, np.int32)
    expected = _outcome(torch_fn, torch.tensor(X_INDEXED), torch.tensor(index, dtype=torch.int64))
    eager = _outcome(fn, aotjax.tensor(X_INDEXED), aotjax.tensor(index))
    checked_x = aotjax.tensor(X_INDEXED)
    checked = _outcome(CHECKED[op], checked_x, aotjax.tensor(index))
    if isinstance(expected, Exception):
        assert type(eager) is type(expected), f"PyTorch raises {expected!r}, eager mode gives {eager!r}"
        assert type(checked) is type(eager) and str(checked) == str(eager)  # the op's message and line
        np.testing.assert_array_equal(checked_x.numpy(), X_INDEXED)  # a failed call writes nothing
        return
    assert not isinstance(eager, Exception) and not isinstance(checked, Exception), (eager, checked)
    for got in (eager, checked):
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6)
