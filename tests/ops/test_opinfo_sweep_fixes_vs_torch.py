"""What benchmarks/opinfo_sweep.py (PyTorch's OpInfo samples run by torch and aotjax) found, and the leftovers of issue
29, against torch: `zeta` at a negative `q` and far away (hence `polygamma` at a negative x), torch's `out=` for the
addmm family and the other products, and the optimizers' `betas`."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import aotjax
from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from tests.helpers import FLOAT, INT

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


# -- torch's Scalar alpha / beta / value for the result's dtype ---------------------------------------------------
def _ints(lib, *shape):
    return lib.tensor(np.arange(1, 1 + np.prod(shape)).reshape(shape) % 5 - 2, dtype=lib.long)


TRUNCATING = {  # integer tensors, float coefficients: torch truncates them toward zero
    "addmm": lambda L, **k: L.addmm(_ints(L, 2, 2), _ints(L, 2, 3), _ints(L, 3, 2), **k),
    "addmv": lambda L, **k: L.addmv(_ints(L, 2), _ints(L, 2, 3), _ints(L, 3), **k),
    "addbmm": lambda L, **k: L.addbmm(_ints(L, 2, 2), _ints(L, 3, 2, 3), _ints(L, 3, 3, 2), **k),
    "baddbmm": lambda L, **k: L.baddbmm(_ints(L, 3, 2, 2), _ints(L, 3, 2, 3), _ints(L, 3, 3, 2), **k),
    "addmm_": lambda L, **k: _ints(L, 2, 2).addmm_(_ints(L, 2, 3), _ints(L, 3, 2), **k),
    "addcmul": lambda L, **k: L.addcmul(_ints(L, 4), _ints(L, 4), _ints(L, 4), value=k["alpha"]),
}


@pytest.mark.parametrize("name", TRUNCATING)
def test_integer_products_truncate_float_alpha_and_beta_as_torch(name):
    for beta, alpha in ((0.2, 0.6), (1.7, -2.6), (-0.5, 3.9), (True, 2)):
        theirs = TRUNCATING[name](torch, beta=beta, alpha=alpha)
        ours = TRUNCATING[name](aotjax, beta=beta, alpha=alpha)
        assert ours.dtype.kind == "i", (name, ours.dtype)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=f"{name} beta={beta} alpha={alpha}")


REFUSING = {  # torch's alpha_check: an integer (bool) result refuses a float (bool) alpha; a real one a complex
    "add": lambda L, a: L.add(_ints(L, 2), _ints(L, 2), alpha=a),
    "add_": lambda L, a: _ints(L, 2).add_(_ints(L, 2), alpha=a),
    "sub": lambda L, a: L.sub(_ints(L, 2), 3, alpha=a),
    "rsub": lambda L, a: L.rsub(_ints(L, 2), _ints(L, 2), alpha=a),
    "addr": lambda L, a: L.addr(_ints(L, 2, 2), _ints(L, 2), _ints(L, 2), beta=a),
    "addr bool": lambda L, a: L.addr(L.ones(2, 2, dtype=L.bool), L.ones(2, dtype=L.bool), L.ones(2, dtype=L.bool),
                                     alpha=a),
}


@pytest.mark.parametrize("name", REFUSING)
def test_a_float_or_bool_alpha_for_an_integer_result_is_refused_as_torch(name):
    for a in (0.5, 2.0) + ((True,) if name != "addr bool" else ()):
        with pytest.raises(RuntimeError):
            REFUSING[name](torch, a)
        with pytest.raises(DTypeError, match=rf"{name.split()[0].removeprefix('r')}: (alpha|beta) must be an "
                                                    rf"integer for a result of dtype (int|bool).*got {a}"):
            REFUSING[name](aotjax, a)


@pytest.mark.parametrize("call", [lambda L: L.add(L.ones(2), L.ones(2), alpha=1j),
                                  lambda L: L.addmm(L.ones(2, 2), L.ones(2, 2), L.ones(2, 2), beta=2j),
                                  lambda L: L.addcmul(L.ones(2), L.ones(2), L.ones(2), value=1j)])
def test_a_complex_alpha_for_a_real_result_is_refused_as_torch(call):
    with pytest.raises(RuntimeError):
        call(torch)
    with pytest.raises(DTypeError, match="must be real for a result of dtype float"):
        call(aotjax)


def test_bool_add_and_addr_stay_bool_as_torch():
    def calls(L):
        a, v, w = L.tensor([[True, False], [False, False]]), L.tensor([True, False]), L.tensor([False, True])
        return [L.add(v, w, alpha=2), L.add(v, w, alpha=0), L.addr(a, v, w, beta=3, alpha=2), L.addr(a, v, w, beta=0),
                L.addr(a, v, w, alpha=False)]
    for ours, theirs in zip(calls(aotjax), calls(torch)):
        assert ours.dtype == np.bool_
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_float_alpha_with_a_float_operand_is_taken_as_torch():
    for L in (aotjax, torch):  # the result is float: alpha=0.5 is fine, int tensors or not
        np.testing.assert_array_equal(L.add(_ints(L, 2), L.ones(2), alpha=0.5).numpy(), [-0.5, 0.5])
        np.testing.assert_array_equal(L.add(_ints(L, 2), 2.5, alpha=2).numpy(), [4.0, 5.0])


# -- tensordot broadcasts a size-1 contracted dim ------------------------------------------------------------------
@pytest.mark.parametrize("shapes, dims", [(((1, 1, 2), (2, 2, 2)), ([0, 1], [2, 0])), (((3, 4), (3, 1)), ([0], [0])),
                                          (((1, 2), (3, 2)), ([0], [0]))])
def test_tensordot_pairs_a_size_1_dim_with_any_size_as_torch(shapes, dims):
    a, b = (np.arange(np.prod(s), dtype=FLOAT).reshape(s) - 2 for s in shapes)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    theirs = torch.tensordot(ta, tb, dims=dims)
    theirs.square().sum().backward()
    ours = aotjax.tensordot(aotjax.tensor(a), aotjax.tensor(b), dims=dims)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-6)
    grads = aotjax.grad(lambda x, y: aotjax.tensordot(x, y, dims=dims).square().sum(), argnums=(0, 1))(
        aotjax.tensor(a), aotjax.tensor(b))
    for g, t in zip(grads, (ta, tb)):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-5)
    with pytest.raises(ShapeError, match=r"differ in size \(2 and 3\): they must match, or one be 1"):
        aotjax.tensordot(aotjax.ones(2, 3), aotjax.ones(3, 3), dims=([0], [0]))


# -- the casts' memory_format, the factories' layout / pin_memory / device -----------------------------------------
@pytest.mark.parametrize("name", ["half", "float", "double", "bfloat16", "int", "long", "bool", "short", "byte",
                                  "char", "cfloat", "cdouble"])
def test_cast_methods_take_memory_format_as_torch(name):
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 2, 2)
    for fmt in ("channels_last", "contiguous_format", "preserve_format"):
        ours = getattr(aotjax.tensor(x), name)(memory_format=getattr(aotjax, fmt))
        theirs = getattr(torch.tensor(x), name)(memory_format=getattr(torch, fmt))
        assert ours.stride() == theirs.stride() and ours.dtype.itemsize <= theirs.element_size(), (name, fmt)
        np.testing.assert_array_equal(ours.numpy().astype(np.complex128), theirs.numpy().astype(np.complex128)
                                      if theirs.is_complex() else theirs.double().numpy())


FACTORIES = {
    "zeros": lambda L, **k: L.zeros(2, 3, **k), "ones": lambda L, **k: L.ones((2,), **k),
    "empty": lambda L, **k: L.empty(2, **k), "full": lambda L, **k: L.full((2,), 1.5, **k),
    "rand": lambda L, **k: L.rand(2, 3, **k), "randn": lambda L, **k: L.randn(2, **k),
    "randint": lambda L, **k: L.randint(0, 5, (2,), **k), "randperm": lambda L, **k: L.randperm(4, **k),
    "arange": lambda L, **k: L.arange(4, **k), "linspace": lambda L, **k: L.linspace(0, 1, 3, **k),
    "logspace": lambda L, **k: L.logspace(0, 1, 3, **k), "eye": lambda L, **k: L.eye(2, **k),
    "normal": lambda L, **k: L.normal(1.6, 0.3, (2, 3), **k),
    "empty_strided": lambda L, **k: L.empty_strided((2, 3), (3, 1), **k),
    "scalar_tensor": lambda L, **k: L.scalar_tensor(1.5, **k),
    "tril_indices": lambda L, **k: L.tril_indices(3, 3, **k), "triu_indices": lambda L, **k: L.triu_indices(3, 2, **k),
    "zeros_like": lambda L, **k: L.zeros_like(L.ones(2), **k),
    "full_like": lambda L, **k: L.full_like(L.ones(2), 2, **k),
    "rand_like": lambda L, **k: L.rand_like(L.ones(2), **k), "randn_like": lambda L, **k: L.randn_like(L.ones(2), **k),
    "randint_like": lambda L, **k: L.randint_like(L.ones(2), 5, **k),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_factories_take_layout_pin_memory_and_device_as_torch(name):
    kwargs = {"layout": "strided", "pin_memory": False, "device": "cpu"}
    theirs = FACTORIES[name](torch, **{**kwargs, "layout": torch.strided})
    ours = FACTORIES[name](aotjax, **{**kwargs, "layout": aotjax.strided})
    assert tuple(ours.shape) == tuple(theirs.shape) and ours.device == aotjax.device("cpu"), name
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.").replace("int64", np.dtype(INT).name)
    assert tuple(FACTORIES[name](aotjax, layout=None).shape) == tuple(theirs.shape)
    with pytest.raises(UnsupportedError, match=rf"{name}: layout='sparse_coo' is not supported"):
        FACTORIES[name](aotjax, layout="sparse_coo")


def test_a_factory_placed_by_device_that_requires_grad_is_a_leaf():
    x = aotjax.randn(3, device="cpu", requires_grad=True, pin_memory=False)
    assert x.requires_grad and x.is_leaf
    assert aotjax.tensor([1.0], pin_memory=False).shape == (1,)


# -- integer arange / linspace from float ends, randint of a float dtype -----------------------------------------
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16"])
def test_integer_arange_of_float_bounds_as_torch(dtype):  # int64: bounds truncated first; others: length of floats
    for args in [(0.1, -7.9, -4.0), (0.0, -8.000001, -4.0), (0.5, 5.5, 1.5), (-2.7, 3.2, 2.9), (0, 2, 0.5)]:
        try:
            theirs = torch.arange(*args, dtype=getattr(torch, dtype)).tolist()
        except (RuntimeError, ValueError):  # int64: the step 0.5 truncated to 0
            with pytest.raises(ValueError, match="arange: step must be nonzero"):
                aotjax.arange(*args, dtype=getattr(aotjax, dtype))
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # int64 without x64: int32, with a warning
            assert aotjax.arange(*args, dtype=getattr(aotjax, dtype)).tolist() == theirs, (dtype, args)


def test_integer_linspace_truncates_float64_values_as_torch():  # float32 steps would give 0.9999998 -> 0 at [21]
    for start, end, steps in [(4.3, -3, 50), (-3, 4.3, 50), (0, 7, 50), (-9.9, 9.9, 37)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = aotjax.linspace(start, end, steps, dtype=aotjax.int64).tolist()
        assert ours == torch.linspace(start, end, steps, dtype=torch.int64).tolist(), (start, end, steps)


@pytest.mark.parametrize("dtype", ["float32", "bool", "int8"])
def test_randint_of_a_float_or_bool_dtype_draws_whole_numbers_as_torch(dtype):
    x = aotjax.randint(0, 2 if dtype == "bool" else 7, (50,), dtype=getattr(aotjax, dtype))
    assert x.dtype == np.dtype(dtype) and x.dtype == aotjax.randint(3, (2,), dtype=getattr(aotjax, dtype)).dtype
    values = x.numpy().astype(np.float64)
    assert (values == np.round(values)).all() and values.min() >= 0 and values.max() < 7


# -- zeta far from 0 -----------------------------------------------------------------------------------------------
def test_zeta_at_large_q_does_not_underflow_as_torch():  # jax's series sums terms that underflow in float32
    x = np.array([4.94217, 5.0, 6.34933, 5.65533, 2.0, 1.5, 3.0], FLOAT)
    q = np.array([1e8, 1e8, 1e6, 1e7, 2e4, 5e5, 1.5e4], FLOAT)
    truth = torch.special.zeta(torch.tensor(x, dtype=torch.float64), torch.tensor(q, dtype=torch.float64)).numpy()
    ours = aotjax.special.zeta(aotjax.tensor(x), aotjax.tensor(q)).numpy()
    np.testing.assert_allclose(ours, truth, rtol=1e-5 if FLOAT == np.float32 else 1e-10, atol=0)


# -- bools accumulated by the scatters (an or, an and), running max/min of bools -----------------------------------
def _bool_scatters(L):
    b, i = (lambda v: L.tensor(v, dtype=L.bool)), L.tensor
    return {
        "scatter_add": lambda: b([False] * 4).scatter_add(0, i([0, 0, 1]), b([True, True, False])),
        "scatter add": lambda: b([False] * 4).scatter(0, i([0, 0, 1]), b([True, True, False]), reduce="add"),
        "scatter_reduce sum": lambda: b([True, False, True]).scatter_reduce(0, i([0, 0, 1]), b([False, True, False]),
                                                                            "sum", include_self=False),
        "scatter_reduce prod": lambda: b([True, True, True]).scatter_reduce(0, i([0, 0, 1]), b([True, True, False]),
                                                                            "prod"),
        "scatter_reduce amin": lambda: b([True, True, True]).scatter_reduce(0, i([0, 0, 1]), b([True, False, True]),
                                                                            "amin"),
        "index_add": lambda: b([True, False, False]).index_add(0, i([1, 1, 2]), b([False, True, False]), alpha=True),
        "index_put": lambda: b([False] * 3).index_put((i([1, 1]),), b([True, True]), accumulate=True),
        "put": lambda: b([[False, False], [False, True]]).put(i([0, 0, 3]), b([True, True, False]), accumulate=True),
        "cummax": lambda: b([[True, False, True], [False, False, True]]).cummax(1),
        "cummin": lambda: b([[True, False, True], [False, False, True]]).cummin(0),
    }


@pytest.mark.parametrize("name", _bool_scatters(torch))
def test_bool_scatters_and_running_extrema_as_torch(name):
    ours, theirs = _bool_scatters(aotjax)[name](), _bool_scatters(torch)[name]()
    for o, t in zip(ours, theirs) if isinstance(theirs, tuple) else [(ours, theirs)]:
        assert o.dtype == (np.bool_ if t.dtype == torch.bool else INT), name
        np.testing.assert_array_equal(o.numpy(), t.numpy(), err_msg=name)


# -- 0-d inputs -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [3.0, 0.0])
def test_nonzero_of_a_0d_tensor_as_torch(value):
    for as_tuple in (False, True):
        ours = aotjax.nonzero(aotjax.tensor(value), as_tuple=as_tuple)
        theirs = torch.nonzero(torch.tensor(value), as_tuple=as_tuple)
        for o, t in zip(ours, theirs) if as_tuple else [(ours, theirs)]:
            assert tuple(o.shape) == tuple(t.shape) and o.dtype == INT
            np.testing.assert_array_equal(o.numpy(), t.numpy())
    assert tuple(aotjax.argwhere(aotjax.tensor(value)).shape) == tuple(torch.argwhere(torch.tensor(value)).shape)


def test_unique_consecutive_of_a_0d_tensor_as_torch():
    ours = aotjax.unique_consecutive(aotjax.tensor(3.0), return_inverse=True, return_counts=True)
    theirs = torch.unique_consecutive(torch.tensor(3.0), return_inverse=True, return_counts=True)
    for o, t in zip(ours, theirs):
        assert tuple(o.shape) == tuple(t.shape)
        np.testing.assert_array_equal(o.numpy(), t.numpy())


def test_index_add_of_a_0d_tensor_as_torch():  # torch reads the 0-d self and source as 1-d of one element
    for L in (aotjax, torch):
        x = L.tensor(2.0)
        assert x.index_add(0, L.tensor([0]), L.tensor(3.0), alpha=-1).item() == -1.0
        assert x.index_add_(-1, L.tensor(0), L.tensor(3.0), alpha=2) is x and x.item() == 8.0 and x.ndim == 0


def test_sum_to_an_empty_size_is_the_sum_as_torch():  # torch's sum_to(x, ()) is x.sum(): bools count as ints
    for value in (True, [1, 2], [[0.5, 1.0]]):
        ours, theirs = aotjax.tensor(value).sum_to_size(()), torch.tensor(value).sum_to_size(())
        assert ours.shape == () and ours.item() == theirs.item()
        assert ours.dtype == (INT if theirs.dtype == torch.int64 else np.float32)
    assert aotjax.tensor([True]).sum_to_size(1).dtype == np.bool_  # no reduction: x itself, as torch


def test_masked_var_and_logsumexp_of_integers_as_torch():  # var: a float result; logsumexp: cast back, truncated
    for L in (aotjax, torch):
        x, m = L.arange(6).reshape(2, 3), L.tensor([[True, False, True], [True, True, True]])
        np.testing.assert_allclose(L.masked.var(x).numpy(), 3.5)
        np.testing.assert_allclose(L.masked.std(x, 1, mask=m).numpy(), [2 ** 0.5, 1.0], rtol=1e-6)
        assert L.masked.var(x).dtype == (np.float32 if L is aotjax else torch.float32)
        lse = L.masked.logsumexp(x, 1, mask=m)
        assert lse.tolist() == [2, 5] and not lse.is_floating_point()
        assert L.masked.logsumexp(L.tensor([True, False]), 0).item() is True


def test_addr_promotes_its_operands_as_torch():  # the other products require one dtype; addr promotes
    def calls(L):
        i, f, b = (lambda *s: L.ones(*s, dtype=L.int32)), L.ones, (lambda *s: L.ones(*s, dtype=L.bool))
        return [L.addr(b(2, 2), i(2), i(2)), L.addr(i(2, 2), f(2), f(2), beta=0.5), L.addr(f(2, 2), i(2), i(2)),
                f(2, 2).addr_(i(2), i(2))]
    for ours, theirs in zip(calls(aotjax), calls(torch)):
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    with pytest.raises(RuntimeError):
        torch.ones(2, 2, dtype=torch.int32).addr_(torch.ones(2), torch.ones(2))
    with pytest.raises(DTypeError, match="addr_: the result type float32 cannot be cast to the dtype of the tensor"):
        aotjax.ones(2, 2, dtype=aotjax.int32).addr_(aotjax.ones(2), aotjax.ones(2))


# -- torch.fill (out of place) --------------------------------------------------------------------------------------
def test_fill_out_of_place_and_its_gradient_as_torch():
    for L in (aotjax, torch):
        assert L.fill(L.ones(2, dtype=L.int32), 2.7).tolist() == [2, 2]
        x, v = L.ones(3, requires_grad=True), L.tensor(2.0, requires_grad=True)
        out = L.fill(x, v)
        assert out.tolist() == [2.0, 2.0, 2.0] and x.tolist() == [1.0, 1.0, 1.0]
        gx, gv = L.autograd.grad(out.sum(), [x, v])
        assert gx.tolist() == [0.0, 0.0, 0.0] and gv.item() == 3.0



# -- einsum's transpose with a size-0 dim (bilinear on an empty batch) ----------------------------------------------
@pytest.mark.parametrize("equation, shapes", [("bi,bj->ij", [(0, 3), (0, 4)]), ("bi,oij,bj->bo", [(0, 3), (5, 3, 4),
                                                                                                    (0, 4)]),
                                              ("bi,bj->ij", [(0, 3), (1, 4)])])
def test_einsum_gradient_with_a_size_0_dim_as_torch(equation, shapes):
    arrays = [np.arange(np.prod(s), dtype=FLOAT).reshape(s) + 1 for s in shapes]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    theirs = torch.autograd.grad(torch.einsum(equation, *ts).sum(), ts)
    ours = aotjax.grad(lambda *xs: aotjax.einsum(equation, *xs).sum(), argnums=tuple(range(len(arrays))))(
        *map(aotjax.tensor, arrays))
    for o, t in zip(ours, theirs):
        assert tuple(o.shape) == tuple(t.shape)
        np.testing.assert_array_equal(o.numpy(), t.numpy())


def test_multi_margin_loss_of_a_0d_input_as_torch():  # one sample of one class: no other class, a loss of 0
    for reduction in ("mean", "none"):
        ours = aotjax.nn.functional.multi_margin_loss(aotjax.tensor(0.7), aotjax.tensor(0), reduction=reduction)
        theirs = torch.nn.functional.multi_margin_loss(torch.tensor(0.7), torch.tensor(0), reduction=reduction)
        assert ours.shape == tuple(theirs.shape) and ours.item() == theirs.item()


# -- linalg edge shapes -----------------------------------------------------------------------------------------
def test_vander_of_a_0d_tensor_and_ldl_factor_of_empty_matrices_as_torch():
    for L in (aotjax, torch):
        assert L.linalg.vander(L.tensor(2.0), N=3).tolist() == [[1.0, 2.0, 4.0]]
        LD, pivots, info = L.linalg.ldl_factor_ex(L.zeros(2, 0, 0))
        assert (tuple(LD.shape), tuple(pivots.shape), info.tolist()) == ((2, 0, 0), (2, 0), [0, 0])
        assert tuple(L.linalg.ldl_factor(L.zeros(0, 0)).pivots.shape) == (0,)


# -- a batch of 0 through the pools, unfold and fold ------------------------------------------------------------
EMPTY_BATCH = {
    "unfold": ((0, 2, 4, 4), lambda F, x: F.unfold(x, 2)),
    "fold": ((0, 8, 4), lambda F, x: F.fold(x, (3, 3), 2)),
    "adaptive_avg_pool1d": ((0, 2, 5), lambda F, x: F.adaptive_avg_pool1d(x, 2)),
    "adaptive_avg_pool3d": ((0, 2, 3, 3, 3), lambda F, x: F.adaptive_avg_pool3d(x, 2)),
    "adaptive_max_pool2d": ((0, 2, 5, 5), lambda F, x: F.adaptive_max_pool2d(x, 2, return_indices=True)),
    "max_pool1d": ((0, 2, 5), lambda F, x: F.max_pool1d(x, 2)),
    "avg_pool2d": ((0, 2, 4, 4), lambda F, x: F.avg_pool2d(x, 2)),
    "lp_pool1d": ((0, 2, 4), lambda F, x: F.lp_pool1d(x, 2, 2)),
    "fractional_max_pool2d": ((0, 2, 5, 5), lambda F, x: F.fractional_max_pool2d(x, 2, output_size=2)),
    "max_unpool1d": ((0, 2, 3), lambda F, x: F.max_unpool1d(x, (x * 0).long(), 2)),
}


@pytest.mark.parametrize("name", EMPTY_BATCH)
def test_a_batch_of_0_as_torch(name):  # the window sizes were reshaped as -1, which a 0-element tensor cannot infer
    shape, f = EMPTY_BATCH[name]
    theirs = f(torch.nn.functional, torch.zeros(shape))
    ours = f(aotjax.nn.functional, aotjax.zeros(shape))
    for o, t in zip(*((ours, theirs) if isinstance(theirs, tuple) else ((ours,), (theirs,)))):
        assert tuple(o.shape) == tuple(t.shape), name
    if name in ("unfold", "adaptive_avg_pool3d"):
        g = aotjax.grad(lambda x: f(aotjax.nn.functional, x).sum())(aotjax.zeros(shape))
        assert tuple(g.shape) == shape
    with pytest.raises(ShapeError, match="non-zero channel and spatial sizes"):  # channels may not be 0: torch's rule
        aotjax.nn.functional.unfold(aotjax.zeros(2, 0, 4, 4), 2)


# -- integer convolutions, average pools and local_response_norm (torch's CPU kernels) -------------------------------
def _int_input(L, shape, dtype):
    return L.tensor((np.arange(np.prod(shape)) * 5 % 13 - 6).reshape(shape), dtype=getattr(L, dtype))


INT_OPS = {  # name: (input shape, the call, the integer dtypes torch's CPU runs it for)
    "conv1d": ((1, 2, 5), lambda L, x: L.nn.functional.conv1d(x, x[0, :, :2].reshape(1, 2, 2) + 1, stride=2),
               ("uint8", "int8", "int64")),
    "conv2d": ((1, 2, 4, 4), lambda L, x: L.nn.functional.conv2d(x, x[:, :, :2, :2] * 3, x[0, 0, 0, :1], padding=1),
               ("uint8", "int8", "int64")),
    "conv_transpose1d": ((1, 2, 4), lambda L, x: L.nn.functional.conv_transpose1d(x, x.reshape(2, 1, 4), stride=2),
                         ("int64",)),
    "avg_pool1d": ((1, 2, 9), lambda L, x: L.nn.functional.avg_pool1d(x, 3, 2, 1, count_include_pad=False),
                   ("int64",)),
    "avg_pool2d": ((1, 2, 4, 4), lambda L, x: L.nn.functional.avg_pool2d(x, 2, padding=1, ceil_mode=True),
                   ("int64",)),
    "avg_pool3d": ((1, 1, 3, 3, 3), lambda L, x: L.nn.functional.avg_pool3d(x, 2, 1, divisor_override=3),
                   ("int64",)),
    "lp_pool1d": ((1, 2, 6), lambda L, x: L.nn.functional.lp_pool1d(x, 1, 2), ("int64",)),
    "local_response_norm": ((1, 4, 3), lambda L, x: L.nn.functional.local_response_norm(x * 30, 3, alpha=0.5),
                            ("int64",)),
}


@pytest.mark.parametrize("name", INT_OPS)
def test_integer_inputs_run_as_torch_s_cpu_kernels(name):  # avg_pool truncates each mean toward zero, as torch
    shape, f, runs = INT_OPS[name]
    for dtype in ("uint8", "int8", "int64"):
        if dtype not in runs:
            with pytest.raises(RuntimeError):
                f(torch, _int_input(torch, shape, dtype))
            if dtype != "int64" or INT == np.int64:  # NOTE: without x64 int64 is int32, which stands for it here
                with pytest.raises(DTypeError, match=r"(pool\dd|conv\w*|norm): expected (a )?floating-point or "):
                    f(aotjax, _int_input(aotjax, shape, dtype))
            continue
        theirs = f(torch, _int_input(torch, shape, dtype))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = f(aotjax, _int_input(aotjax, shape, dtype))
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.").replace("int64", np.dtype(INT).name)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, err_msg=f"{name} {dtype}")


# -- ctc_loss's gradient is torch's (its backward assumes log_softmax outputs) --------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_ctc_loss_gradient_in_log_probs_as_torch(reduction):
    rng = np.random.default_rng(0)
    lp = torch.log_softmax(torch.tensor(rng.standard_normal((6, 3, 4)), dtype=getattr(torch, FLOAT.name)), 2)
    lp = (lp - 0.5).numpy()  # NOTE: not log_softmax outputs: torch's gradient is then not the exact derivative
    targets, input_lengths, target_lengths = rng.integers(1, 4, (3, 3)), [6, 5, 2], [3, 2, 3]  # the last: infinite
    t = torch.tensor(lp, requires_grad=True)
    loss = torch.nn.functional.ctc_loss(t, torch.tensor(targets), input_lengths, target_lengths, reduction=reduction,
                                        zero_infinity=True)
    weights = np.arange(1.0, 1 + loss.numel(), dtype=FLOAT).reshape(tuple(loss.shape))
    (loss * torch.tensor(weights)).sum().backward()

    def ours(x):
        return aotjax.nn.functional.ctc_loss(x, aotjax.tensor(targets), input_lengths, target_lengths,
                                             reduction=reduction, zero_infinity=True)
    np.testing.assert_allclose(ours(aotjax.tensor(lp)).numpy(), loss.detach().numpy(), rtol=1e-5)
    g = aotjax.grad(lambda x: (ours(x) * aotjax.tensor(weights)).sum())(aotjax.tensor(lp))
    np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-6)


# -- linalg: lstsq's drivers, tolerance tensors, norms' derivatives, tensorsolve's dims ------------------------------
@pytest.mark.parametrize("driver", ["gels", "gelsy", "gelsd"])
@pytest.mark.parametrize("shapes", [((4, 3), (4, 2)), ((2, 3), (2,)), ((2, 4, 3), (2, 4))])
def test_lstsq_results_per_driver_as_torch(driver, shapes):
    rng = np.random.default_rng(1)
    A, B = (rng.standard_normal(s).astype(FLOAT) for s in shapes)
    ta, tb = torch.tensor(A, requires_grad=True), torch.tensor(B, requires_grad=True)
    theirs = torch.linalg.lstsq(ta, tb, driver=driver)
    sum(r.sum() for r in theirs if r.is_floating_point()).backward()
    ours = aotjax.linalg.lstsq(aotjax.tensor(A), aotjax.tensor(B), driver=driver)
    for o, t in zip(ours, theirs):
        assert tuple(o.shape) == tuple(t.shape) and o.dtype.kind == ("f" if t.is_floating_point() else "i")
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-5)
    grads = aotjax.grad(lambda a, b: sum(r.sum() for r in aotjax.linalg.lstsq(a, b, driver=driver)
                                         if r.is_floating_point()), argnums=(0, 1))(aotjax.tensor(A), aotjax.tensor(B))
    for g, t in zip(grads, (ta, tb)):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-3, atol=1e-4)


def test_pinv_and_matrix_rank_take_tolerance_tensors_as_torch():
    A = np.random.default_rng(2).standard_normal((2, 3, 3)).astype(FLOAT)
    for kwargs in ({"rtol": [0.0, 0.9]}, {"atol": [0.5, 2.0]}, {"atol": [1.0, 1.0], "rtol": [0.1, 0.5]}):
        tk, ak = ({k: L.tensor(v, dtype=getattr(L, FLOAT.name)) if isinstance(v, list) else v
                   for k, v in kwargs.items()} for L in (torch, aotjax))
        t = torch.tensor(A, requires_grad=True)
        theirs = torch.linalg.pinv(t, **tk)
        theirs.sum().backward()
        np.testing.assert_allclose(aotjax.linalg.pinv(aotjax.tensor(A), **ak).numpy(), theirs.detach().numpy(),
                                   rtol=1e-4, atol=1e-5)
        g = aotjax.jit(aotjax.grad(lambda a, k=ak: aotjax.linalg.pinv(a, **k).sum()))(aotjax.tensor(A))
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-3, atol=1e-4)
        assert aotjax.linalg.matrix_rank(aotjax.tensor(A), **ak).tolist() == \
            torch.linalg.matrix_rank(torch.tensor(A), **tk).tolist()
    D = np.diag([1.0, 1e-7, 0.0]).astype(FLOAT)  # an atol of 0 keeps the default rtol; the older tol is an atol
    for kwargs in ({"atol": 0.0}, {"tol": 0.0}, {"atol": 0.0, "rtol": 0.0}):
        assert aotjax.linalg.matrix_rank(aotjax.tensor(D), **kwargs).item() == \
            torch.linalg.matrix_rank(torch.tensor(D), **kwargs).item()


@pytest.mark.parametrize("ord", [0.5, -1.0, float("inf"), -float("inf")])
def test_vector_norm_derivative_at_zero_elements_as_torch(ord):  # jax's: nan (ord < 1), shared by zeros (inf)
    for x in ([0.0, 0.0, 0.0], [0.0, 1.5, -3.0], [3.0, -3.0, 1.0]):
        t = torch.tensor(x, requires_grad=True)
        torch.linalg.vector_norm(t, ord).backward()
        g = aotjax.grad(lambda a: aotjax.linalg.vector_norm(a, ord))(aotjax.tensor(x))
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-5, err_msg=f"ord={ord} x={x}")


def test_nuclear_norm_over_dims_with_keepdim_as_torch():  # torch.norm(p='nuc') was refused
    A = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(FLOAT)
    for f in (lambda L, a: L.linalg.matrix_norm(a, "nuc", dim=(2, 0), keepdim=True),
              lambda L, a: L.linalg.norm(a, "nuc", dim=(-1, 1)),
              lambda L, a: L.norm(a, p="nuc", dim=(0, 1), keepdim=True), lambda L, a: a[0].norm(p="nuc")):
        t = torch.tensor(A, requires_grad=True)
        theirs = f(torch, t)
        theirs.sum().backward()
        ours = f(aotjax, aotjax.tensor(A))
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5)
        g = aotjax.grad(lambda a, f=f: f(aotjax, a).sum())(aotjax.tensor(A))
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_tensorsolve_with_dims_reads_sizes_only_as_torch():  # A's leading dims need B's size, not its shape
    rng = np.random.default_rng(4)
    for a_shape, b_shape, dims in (((2, 3, 6), (2, 3), (0, 2)), ((2, 3, 6), (3, 2), None)):
        A, B = rng.standard_normal(a_shape).astype(FLOAT), rng.standard_normal(b_shape).astype(FLOAT)
        np.testing.assert_allclose(aotjax.linalg.tensorsolve(aotjax.tensor(A), aotjax.tensor(B), dims=dims).numpy(),
                                   torch.linalg.tensorsolve(torch.tensor(A), torch.tensor(B), dims=dims).numpy(),
                                   rtol=1e-3, atol=1e-4)


# -- jax's 32-bit mode: unravel_index past int32, integer linspace between traced ends -------------------------------
@pytest.mark.parametrize("indices, shape", [([2, 3, -1, 2**31 - 1], (4, 2**30)), ([5, -1, -2**31], (4, 2**16, 2**16)),
                                            ([4, 1, -1, 7], (2, 3))])
def test_unravel_index_with_a_size_past_int32_as_torch(indices, shape):  # the `+ numel` of negatives overflowed
    theirs = [t.tolist() for t in torch.unravel_index(torch.tensor(indices), shape)]
    assert [t.tolist() for t in aotjax.unravel_index(aotjax.tensor(indices), shape)] == theirs
    f = aotjax.jit(lambda i: aotjax.unravel_index(i, shape))
    assert [t.tolist() for t in f(aotjax.tensor(indices))] == theirs


def test_integer_linspace_between_traced_ends_as_torch():  # float32 values an ulp under an integer were 1 lower
    f = aotjax.jit(lambda start, end: aotjax.linspace(start, end, 50, dtype=aotjax.int64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for start, end in ((-19.3, 2), (-19.3, 16), (0.0, 7), (4.3, -3), (-13.3, -20)):
            ours = f(aotjax.tensor(start), aotjax.tensor(end)).tolist()
            assert ours == torch.linspace(start, end, 50, dtype=torch.int64).tolist(), (start, end)


# -- narrow / select at a traced 0-d tensor position ----------------------------------------------------------------
@pytest.mark.parametrize("dim, start, length", [(1, 2, 2), (2, -3, 2), (0, 0, 3)])
def test_narrow_at_a_traced_start_as_torch(dim, start, length):
    x = np.arange(60, dtype=FLOAT).reshape(3, 4, 5)
    theirs = torch.narrow(torch.tensor(x), dim, torch.tensor(start), length)
    for f in (lambda a, s: aotjax.narrow(a, dim, s, length), lambda a, s: a.narrow(dim, s, length)):
        np.testing.assert_array_equal(aotjax.jit(f)(aotjax.tensor(x), aotjax.tensor(start)).numpy(), theirs.numpy())
    t = torch.tensor(x, requires_grad=True)
    torch.narrow(t, dim, torch.tensor(start), length).square().sum().backward()
    g = aotjax.jit(aotjax.grad(lambda a, s: a.narrow(dim, s, length).square().sum()))(aotjax.tensor(x),
                                                                                       aotjax.tensor(start))
    np.testing.assert_array_equal(g.numpy(), t.grad.numpy())
    select = aotjax.jit(lambda a, i: a.select(dim, i))(aotjax.tensor(x), aotjax.tensor(start))
    np.testing.assert_array_equal(select.numpy(), torch.tensor(x).select(dim, torch.tensor(start)).numpy())


@pytest.mark.parametrize("name", ["det", "eig", "cond"])
def test_gradient_through_empty_matrices_as_torch(name):  # jax's derivatives of det and eig failed on [0, 0]
    f = {"det": lambda L, a: L.linalg.det(a), "eig": lambda L, a: L.linalg.eig(a).eigenvectors.abs(),
         "cond": lambda L, a: L.linalg.cond(a, "fro")}[name]
    theirs = f(torch, torch.zeros(2, 0, 0))
    ours = f(aotjax, aotjax.zeros(2, 0, 0))
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert aotjax.grad(lambda a: f(aotjax, a).sum())(aotjax.zeros(2, 0, 0)).shape == (2, 0, 0)
