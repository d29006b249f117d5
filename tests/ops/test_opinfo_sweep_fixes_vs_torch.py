"""What benchmarks/opinfo_sweep.py (PyTorch's OpInfo samples run by torch and aotjax) found, and the leftovers of issue
29, against torch: `zeta` at a negative `q` and far away (hence `polygamma` at a negative x), torch's `out=` for the
addmm family and the other products, and the optimizers' `betas`."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import aotjax
from tests.helpers import FLOAT

# -- zeta and polygamma ------------------------------------------------------------------------------------------
Q = [0.0, -0.0, -1.0, -2.0, -2.5, -8.4784, -20.3, -0.5, 0.5, 3.0, 1e-30, -1e-30, 3e8, 1e9,
     -np.inf, np.inf, np.nan]


@pytest.mark.parametrize("x", [2.0, 3.0, 4.0, 2.5, 1.0, 0.5, np.nan])
def test_zeta_at_poles_negative_and_far_q_as_torch(x):
    q = np.array(Q, FLOAT)
    ours = aotjax.special.zeta(aotjax.tensor(np.full_like(q, x)), aotjax.tensor(q)).numpy()
    theirs = torch.special.zeta(torch.tensor(np.full_like(q, x)), torch.tensor(q)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=0, equal_nan=True, err_msg=f"x={x}, q={Q}")


def test_zeta_under_jit_as_eager():
    q = np.array([-2.5, -1.0, 0.0, 4.0], FLOAT)
    x = np.full_like(q, 2.0)
    f = aotjax.jit(lambda x, q: aotjax.special.zeta(x, q))  # the shift is a while loop: traced, too
    np.testing.assert_allclose(f(aotjax.tensor(x), aotjax.tensor(q)).numpy(),
                               torch.special.zeta(torch.tensor(x), torch.tensor(q)).numpy(), rtol=1e-5)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_polygamma_at_negative_x_as_torch(n):  # jax's own is wrong below -8 (its zeta)
    x = np.array([-8.4784, -1.7658, -20.3, -4.5, 2.5], FLOAT)
    np.testing.assert_allclose(aotjax.polygamma(n, aotjax.tensor(x)).numpy(),
                               torch.polygamma(n, torch.tensor(x)).numpy(), rtol=1e-4, atol=1e-4)


# -- out= for the products ---------------------------------------------------------------------------------------
def _ones(lib, *shape):
    return lib.tensor(np.arange(1, 1 + np.prod(shape), dtype=FLOAT).reshape(shape) / 10)


PRODUCTS = {
    "addmm": lambda L: (_ones(L, 2, 2), _ones(L, 2, 3), _ones(L, 3, 2)),
    "addmv": lambda L: (_ones(L, 2), _ones(L, 2, 3), _ones(L, 3)),
    "addbmm": lambda L: (_ones(L, 2, 2), _ones(L, 4, 2, 3), _ones(L, 4, 3, 2)),
    "baddbmm": lambda L: (_ones(L, 4, 2, 2), _ones(L, 4, 2, 3), _ones(L, 4, 3, 2)),
    "addr": lambda L: (_ones(L, 2, 3), _ones(L, 2), _ones(L, 3)),
    "inner": lambda L: (_ones(L, 2, 3), _ones(L, 3)),
    "vdot": lambda L: (_ones(L, 3), _ones(L, 3)),
    "kron": lambda L: (_ones(L, 2, 1), _ones(L, 3)),
    "tensordot": lambda L: (_ones(L, 2, 3), _ones(L, 3, 2)),
    "cross": lambda L: (_ones(L, 2, 3), _ones(L, 2, 3).flip(1)),
    "chain_matmul": lambda L: (_ones(L, 2, 3), _ones(L, 3, 2)),
}


def _with_out(lib, name, out_shape):
    out = lib.zeros(out_shape, dtype=getattr(lib, FLOAT.name))
    kwargs = {"dims": 1} if name == "tensordot" else {"beta": 0.5, "alpha": 2.0} if name.startswith(("add", "bad")) \
        else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = getattr(lib, name)(*PRODUCTS[name](lib), out=out, **kwargs)
    resized = [w for w in caught if "resized" in str(w.message)]
    return got is out, out, len(resized)


@pytest.mark.parametrize("name", PRODUCTS)
def test_products_take_out_and_resize_it_as_torch(name):
    shape = tuple(getattr(torch, name)(*PRODUCTS[name](torch), **({"dims": 1} if name == "tensordot" else {})).shape)
    for out_shape in (shape, (1,), (0,)):  # the right shape; one torch resizes with a warning; an empty one, without
        same, ours, warned = _with_out(aotjax, name, out_shape)
        t_same, theirs, t_warned = _with_out(torch, name, out_shape)
        assert same and t_same, name
        assert tuple(ours.shape) == tuple(theirs.shape) and warned == t_warned, (name, out_shape)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, err_msg=name)


def test_out_of_the_products_under_jit():
    f = aotjax.jit(lambda a, b, c, out: aotjax.addbmm(a, b, c, out=out))
    args = PRODUCTS["addbmm"]
    out = aotjax.zeros(2, 2, dtype=getattr(aotjax, FLOAT.name))
    assert f(*args(aotjax), out) is not None
    np.testing.assert_allclose(out.numpy(), torch.addbmm(*args(torch)).numpy(), rtol=1e-6)


# -- the optimizers' betas ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["Adam", "AdamW", "NAdam", "RAdam", "Adamax"])
def test_three_betas_are_refused_as_torch_refuses_them(name):
    # NOTE: torch (2.13) takes a third beta at construction and fails at the first step ("too many values to unpack
    # (expected 2)"); aotjax refuses it at construction, with the same ValueError
    p = torch.nn.Parameter(torch.ones(2))
    opt = getattr(torch.optim, name)([p], betas=(0.9, 0.999, 0.5))
    p.grad = torch.ones(2)
    with pytest.raises(ValueError):
        opt.step()
    with pytest.raises(ValueError, match=rf"{name}: betas must be a tuple of two numbers, got 3"):
        getattr(aotjax.optim, name)([aotjax.ones(2)], betas=(0.9, 0.999, 0.5))



def test_zeta_derivative_in_q_at_negative_q_as_torch():
    q = np.array([-2.5, -8.4784, 0.5], FLOAT)
    tq = torch.tensor(q, requires_grad=True)
    torch.special.zeta(torch.full((3,), 2.0, dtype=tq.dtype), tq).sum().backward()
    ours = aotjax.grad(lambda q: aotjax.special.zeta(aotjax.full((3,), 2.0, dtype=q.dtype), q).sum())(aotjax.tensor(q))
    np.testing.assert_allclose(ours.numpy(), tq.grad.numpy(), rtol=1e-4)


# -- norms (found by the sweep) ----------------------------------------------------------------------------------
@pytest.mark.parametrize("ord", [float("inf"), 1, -1, 2])
@pytest.mark.parametrize("dim", [(-1, 0), (2, 1)])
def test_matrix_norm_takes_its_dims_in_order_as_torch(ord, dim):  # (-1, 0) is the transpose's norm, not (0, -1)'s
    A = np.arange(12, dtype=FLOAT).reshape(2, 3, 2) - 5
    for keepdim in (False, True):
        ours = aotjax.linalg.matrix_norm(aotjax.tensor(A), ord, dim=dim, keepdim=keepdim)
        theirs = torch.linalg.matrix_norm(torch.tensor(A), ord, dim=dim, keepdim=keepdim)
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5)


@pytest.mark.parametrize("dim", [0, -1, (0,)])
def test_vector_norm_of_a_0d_tensor_over_dim_0_as_torch(dim):
    for ord in (float("inf"), 2.0):
        ours = aotjax.linalg.vector_norm(aotjax.tensor(-2.5), ord, dim=dim, keepdim=True)
        theirs = torch.linalg.vector_norm(torch.tensor(-2.5), ord, dim=dim, keepdim=True)
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.item() == theirs.item()
    assert aotjax.masked.norm(aotjax.tensor(3.0), float("inf"), dim=0, keepdim=True).item() == 3.0
