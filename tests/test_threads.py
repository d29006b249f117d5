"""Threads: compiled functions called from many threads at once, transforms traced in two threads at once, eager
ops in several threads. Each thread has its own interpreter stack; the compile caches are shared.

No sleeps: `threading.Barrier`s inside the traced functions make the threads really interleave (one thread's
trace is open, blocked at a barrier, while the other traces), so every assertion is deterministic. A barrier's
timeout only turns a deadlock into a failure.
"""
from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import aotjax
from aotjax.core.source_info import SourceInfo, source_info_of
from tests.helpers import assert_trees_close

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass

_N_THREADS = 8
_DEADLOCK_GUARD_S = 120


def _barrier(parties: int) -> threading.Barrier:
    return threading.Barrier(parties, timeout=_DEADLOCK_GUARD_S)


def _t(shape, seed: int) -> aotjax.Tensor:
    return aotjax.tensor(np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32))


def _in_threads(work, n: int) -> list:
    """`[work(0), ..., work(n - 1)]`, each call in its own thread, all running at once."""
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(work, range(n)))


def _shape(i: int) -> tuple:
    return (i % 4 + 1, 3)  # four shapes, each used by two of the eight threads


def _close(a, b):
    assert_trees_close(a, b, rtol=1e-5, atol=1e-6)


# -- one compiled function, eight threads -------------------------------------------------------------------------
def _step(w, x, sync=None):
    if sync is not None:
        sync.wait()  # NOTE: inside the trace: the eight threads' first calls all trace at once
    w.sub_(0.1 * x)  # a written input
    return (w * x).sin().sum(), w.t()  # a new value and a view of the input


def _eager_steps(i: int, n_calls: int):
    w, x = _t(_shape(i), i), _t(_shape(i), 100 + i)
    outs = [_step(w, x)[0] for _ in range(n_calls)]
    return w, outs


def test_one_jitted_function_from_eight_threads():
    sync = _barrier(_N_THREADS)
    step = aotjax.jit(functools.partial(_step, sync=sync))

    def work(i):
        w, x = _t(_shape(i), i), _t(_shape(i), 100 + i)
        first, view = step(w, x)  # traced in every thread at once; one entry per shape is kept
        outs = [first] + [step(w, x)[0] for _ in range(4)]
        return w, view, outs

    results = _in_threads(work, _N_THREADS)
    for i, (w, view, outs) in enumerate(results):
        want_w, want_outs = _eager_steps(i, 5)
        _close(outs, want_outs)
        _close(w, want_w)
        _close(view, want_w.t())  # still a view of the thread's own w, after its later writes
    assert len(step._cache) == 4


def test_one_aot_function_from_eight_threads_plain_and_under_grad():
    def loss(w, x):
        return ((w @ x.t()).tanh() * w.sum()).sum()

    compiled = aotjax.aot(loss)
    start = _barrier(_N_THREADS)

    def work(i):
        w, x = _t(_shape(i), i), _t(_shape(i), 100 + i)
        start.wait()
        return [(compiled(w, x), aotjax.grad(compiled, argnums=(0, 1))(w, x)) for _ in range(3)]

    results = _in_threads(work, _N_THREADS)
    for i, runs in enumerate(results):
        w, x = _t(_shape(i), i), _t(_shape(i), 100 + i)
        want = loss(w, x), aotjax.grad(loss, argnums=(0, 1))(w, x)
        for got in runs:
            _close(got, want)
    assert len(compiled._cache) == 4  # per shape one entry: grad on eager arguments runs the plain call's programs


# -- two threads tracing at once ----------------------------------------------------------------------------------
class _Turns:
    """Two threads taking turns inside their traced functions: `a_works` runs while thread B's trace is open and
    blocked, then `b_works` while thread A's is. `None`: a single thread, no waiting."""

    def __init__(self, threads: int):
        self.barriers = [_barrier(threads) for _ in range(3)] if threads > 1 else []

    def wait(self, k: int):
        if self.barriers:
            self.barriers[k].wait()


def _fa(x, turns):
    turns.wait(0)
    y = (x.sin() * 2).cos()  # thread A works; thread B is inside its trace, blocked
    y[0] = 1.0
    turns.wait(1)
    turns.wait(2)  # thread B works
    return y.exp()


def _fb(x, turns):
    turns.wait(0)
    turns.wait(1)  # thread A works
    y = (x * x).tanh()
    y.mul_(3)  # thread B works; thread A is inside its trace, blocked
    turns.wait(2)
    return y.sum()


def _pair(transform_a, transform_b):
    """`transform_a(_fa)` and `transform_b(_fb)` run in two threads taking turns, and each run alone."""
    xa, xb = _t((3,), 0), _t((4,), 1)
    turns = _Turns(2)
    fa, fb = functools.partial(_fa, turns=turns), functools.partial(_fb, turns=turns)
    together = _in_threads(lambda i: transform_a(fa)(xa) if i == 0 else transform_b(fb)(xb), 2)
    alone = _Turns(1)
    return together, [transform_a(functools.partial(_fa, turns=alone))(xa),
                      transform_b(functools.partial(_fb, turns=alone))(xb)]


def test_make_jaxpr_and_grad_trace_at_once():
    (jaxpr, grad), (want_jaxpr, want_grad) = _pair(aotjax.make_jaxpr, aotjax.grad)
    assert str(jaxpr) == str(want_jaxpr)
    assert all(e.source_info.function == "_fa" for e in jaxpr.jaxpr.eqns)
    _close(grad, want_grad)


def test_grad_and_make_jaxpr_trace_at_once():
    (grad_a, jaxpr_b), (want_a, want_b) = _pair(lambda f: aotjax.grad(lambda x: f(x).sum()), aotjax.make_jaxpr)
    _close(grad_a, want_a)
    assert str(jaxpr_b) == str(want_b)


def test_jit_first_calls_trace_at_once():
    (out_a, out_b), (want_a, want_b) = _pair(aotjax.jit, aotjax.jit)
    _close([out_a, out_b], [want_a, want_b])


def test_one_jitted_function_first_called_in_two_threads_at_once():
    turns = _Turns(2)
    seen = []

    def f(x):
        seen.append(threading.get_ident())
        turns.wait(0)  # both threads are tracing the same signature now
        return (x * 2).sin()

    jf = aotjax.jit(f)
    x = _t((3,), 0)
    outs = _in_threads(lambda i: jf(x), 2)
    _close(outs, [(x * 2).sin()] * 2)
    assert len(set(seen)) == 2 and len(jf._cache) == 1  # traced twice, one entry kept
    _close(jf(x), (x * 2).sin())


def test_source_line_attribution_is_per_thread():
    elsewhere = SourceInfo("elsewhere.py", 1, "elsewhere")
    turns = _Turns(2)

    def attribute_elsewhere(i):
        with source_info_of(elsewhere):  # what the backward pass does while it emits an equation
            turns.wait(0)
            turns.wait(1)

    def trace(i):
        turns.wait(0)
        jaxpr = aotjax.make_jaxpr(lambda x: (x.sin() * 2).sum())(_t((3,), 0))  # while the other thread attributes
        turns.wait(1)
        return jaxpr

    _, jaxpr = _in_threads(lambda i: (attribute_elsewhere if i == 0 else trace)(i), 2)
    assert [e.source_info.function for e in jaxpr.jaxpr.eqns] == ["<lambda>"] * 3


# -- eager ops ----------------------------------------------------------------------------------------------------
def _eager_program(a, shared):
    row = a[0]  # a view
    row.add_(shared.sum())  # written through the view
    a.t_()  # a metadata mutation
    b = a.clone()
    b.mul_(2)
    return (a @ b.t()).relu(), row


def test_eager_ops_from_several_threads():
    shared = _t((3,), 99)  # read by every thread, written by none
    start = _barrier(_N_THREADS)

    def work(i):
        a = _t((3, 3), i)
        start.wait()
        out, row = _eager_program(a, shared)
        return a, out, row

    results = _in_threads(work, _N_THREADS)
    for i, got in enumerate(results):
        a = _t((3, 3), i)
        _close(got, (a, *_eager_program(a, shared)))
