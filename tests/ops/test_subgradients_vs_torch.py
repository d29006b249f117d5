"""Derivatives at the points where a function has a kink, against torch's conventions (a subgradient chosen per op:
`abs`'s is 0 at 0, `clamp` passes the gradient at its bounds, `maximum` splits a tie), eagerly and under `grad`."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax

X = [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]
LO = [0.0, -1.0, 0.0, 2.0, 2.0, 4.0]
HI = [1.0, 1.0, 0.0, 1.0, 2.0, 3.0]  # ties with x and with lo, and lo > hi

CASES = {
    "abs": (lambda lib, x, lo, hi: x.abs(), 1),
    "clamp scalars": (lambda lib, x, lo, hi: x.clamp(-1.0, 2.0), 1),
    "clamp min only": (lambda lib, x, lo, hi: x.clamp(min=0.0), 1),
    "clamp max only": (lambda lib, x, lo, hi: lib.clamp(x, max=1.0), 1),
    "clamp tensors": (lambda lib, x, lo, hi: x.clamp(lo, hi), 3),
    "clip_ of a clone": (lambda lib, x, lo, hi: x.clone().clip_(lo, hi), 3),
    "maximum": (lambda lib, x, lo, hi: lib.maximum(x, lo), 2),
    "atan2 at the origin": (lambda lib, x, lo, hi: lib.atan2(x, lo), 2),
    "minimum": (lambda lib, x, lo, hi: lib.minimum(x, lo + hi), 3),
    "hardtanh": (lambda lib, x, lo, hi: lib.nn.functional.hardtanh(x), 1),
    "relu6": (lambda lib, x, lo, hi: lib.nn.functional.relu6(x * 3), 1),
}


def _grads(lib, name):
    fn, n = CASES[name]
    args = [lib.tensor(v, requires_grad=True) for v in (X, LO, HI)]
    (fn(lib, *args) * lib.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])).sum().backward()
    return [a.grad for a in args[:n]]


@pytest.mark.parametrize("name", CASES)
def test_derivatives_at_kinks_are_torch_s(name):
    ours, theirs = _grads(aotjax, name), _grads(torch, name)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_the_same_under_grad():
    fn, _ = CASES["clamp tensors"]
    g = aotjax.grad(lambda *a: fn(aotjax, *a).sum(), argnums=(0, 1, 2))(*(aotjax.tensor(v) for v in (X, LO, HI)))
    args = [torch.tensor(v, requires_grad=True) for v in (X, LO, HI)]
    fn(torch, *args).sum().backward()
    for a, b in zip(g, args, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.grad.numpy())


@pytest.mark.parametrize("fn", [
    lambda lib: lib.linalg.vector_norm(lib.zeros(0, 3), float("inf"), dim=1),
    lambda lib: lib.linalg.vector_norm(lib.zeros(3, 0), float("-inf"), dim=0),
    lambda lib: lib.nn.functional.pdist(lib.zeros(3, 0), float("inf")),
], ids=["inf-norm of no rows", "-inf-norm of no rows", "pdist inf of no features"])
def test_max_norms_over_nothing_empty_results_as_torch(fn):
    ours, theirs = fn(aotjax), fn(torch)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_max_norms_over_a_zero_size_dim_raise_as_torch():
    for lib in (aotjax, torch):
        with pytest.raises(RuntimeError if lib is torch else ValueError, match="inf"):
            lib.linalg.vector_norm(lib.zeros(3, 0), float("inf"), dim=1)
