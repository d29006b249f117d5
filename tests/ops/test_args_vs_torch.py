"""The arguments PyTorch code passes everywhere, against PyTorch (issue 12, item 1's last bullet): `memory_format=`
(strides as torch's, channels-last included), `device=`, `dtype=` on reductions and softmax, `out=` (written in
place, resized as torch does, under jit an ordinary in-place write), `to(..., copy=True)`, the `short`/`byte`/`char`
casts, `nonzero`/`cumsum_`/`tril_`/`triu_` methods, NumPy bfloat16 input and `index_put` with a boolean mask."""
from __future__ import annotations

import warnings

import jax
import ml_dtypes
import numpy as np
import pytest
import torch

import aotjax
from aotjax.core.errors import DTypeError, UnsupportedError
from tests.helpers import FLOAT, INT, X64, asks_for_64_bits

TOL = 1e-9 if X64 else 1e-5
FORMATS = {"contiguous_format": (aotjax.contiguous_format, torch.contiguous_format),
           "preserve_format": (aotjax.preserve_format, torch.preserve_format),
           "channels_last": (aotjax.channels_last, torch.channels_last),
           "channels_last_3d": (aotjax.channels_last_3d, torch.channels_last_3d)}


def _f(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(FLOAT)


def _both(a):
    return aotjax.tensor(a), torch.tensor(a).clone(memory_format=torch.contiguous_format)  # torch's own strides


def _expected_dtype(t: torch.dtype) -> np.dtype:
    d = np.dtype(str(t).removeprefix("torch."))
    if d == np.int64:
        return INT
    return np.dtype(np.float32) if d == np.float64 and not X64 else d


def _close(out, ref, how=""):
    assert tuple(out.shape) == tuple(ref.shape), how
    assert out.dtype == _expected_dtype(ref.dtype), f"{how}: {out.dtype} vs {ref.dtype}"
    tol = TOL if out.dtype == np.float64 else 1e-5
    np.testing.assert_allclose(np.asarray(out, np.float64), ref.detach().double().numpy(), rtol=tol, atol=tol,
                               err_msg=how)


# -- memory_format ---------------------------------------------------------------------------------------------
# views whose layouts the formats act on: contiguous, permuted to NHWC, transposed, sliced (not dense)
LAYOUTS = {"contiguous": lambda x: x, "nhwc": lambda x: x.permute(0, 2, 3, 1).permute(0, 3, 1, 2),
           "transposed": lambda x: x.transpose(1, 3), "sliced": lambda x: x[:, :, ::2]}
SHAPES4 = [(2, 3, 4, 5), (1, 3, 1, 2), (2, 1, 3, 3), (2, 3, 0, 2)]


@pytest.mark.parametrize("fmt", ["contiguous_format", "preserve_format", "channels_last"])
def test_clone_contiguous_and_is_contiguous_strides_match_torch(fmt):
    a_fmt, t_fmt = FORMATS[fmt]
    for shape in SHAPES4:
        base_a, base_t = _both(_f(*shape))
        for name, view in LAYOUTS.items():
            a, t = view(base_a), view(base_t)
            how = f"{fmt} {shape} {name}"
            assert a.stride() == t.stride(), how  # the views themselves
            c = a.clone(memory_format=a_fmt)
            assert c.stride() == t.clone(memory_format=t_fmt).stride(), how
            np.testing.assert_array_equal(c.numpy(), t.numpy())
            assert (c + 1).stride() == (t.clone(memory_format=t_fmt) + 1).stride(), how  # elementwise keeps it
            for f in ("contiguous_format", "channels_last"):
                assert a.is_contiguous(memory_format=FORMATS[f][0]) == t.is_contiguous(memory_format=FORMATS[f][1])
            if fmt != "preserve_format":
                assert a.contiguous(memory_format=a_fmt).stride() == t.contiguous(memory_format=t_fmt).stride(), how
                assert (a.contiguous(memory_format=a_fmt) is a) == (t.contiguous(memory_format=t_fmt) is t), how
            assert aotjax.empty_like(a, memory_format=a_fmt).stride() == torch.empty_like(
                t, memory_format=t_fmt).stride(), how
            assert a.to(memory_format=a_fmt).stride() == t.to(memory_format=t_fmt).stride(), how


def test_channels_last_3d_factories_and_errors():
    a, t = _both(_f(2, 3, 2, 2, 2))
    for fn in (lambda m, x, f: x.clone(memory_format=f), lambda m, x, f: x.contiguous(memory_format=f),
               lambda m, x, f: m.zeros_like(x, memory_format=f), lambda m, x, f: m.ones_like(x.transpose(1, 2)),
               lambda m, x, f: m.full_like(x, 2.0, memory_format=f),
               lambda m, x, f: m.empty(2, 3, 2, 2, 2, memory_format=f)):
        assert fn(aotjax, a, aotjax.channels_last_3d).stride() == fn(torch, t, torch.channels_last_3d).stride()
    assert aotjax.empty(1, 4, 2, 3, memory_format=aotjax.channels_last).stride() == torch.empty(
        1, 4, 2, 3, memory_format=torch.channels_last).stride()
    # torch's own memory formats are read by name; the wrong rank, or an unknown format, raises
    assert a.clone(memory_format=torch.channels_last_3d).stride() == t.clone(
        memory_format=torch.channels_last_3d).stride()
    with pytest.raises(ValueError, match=r"clone: memory_format=channels_last needs a 4-d tensor"):
        a.clone(memory_format=aotjax.channels_last)
    with pytest.raises(ValueError, match="unknown memory_format"):
        a.contiguous(memory_format="nchw")
    with pytest.raises(ValueError, match="preserve_format is not supported by contiguous"):
        a.contiguous(memory_format=aotjax.preserve_format)


def test_channels_last_under_jit_and_vjp():
    x = aotjax.tensor(_f(1, 2, 2, 3))
    f = aotjax.jit(lambda x: x.contiguous(memory_format=aotjax.channels_last) * 2)
    out = f(x)
    ref = torch.tensor(_f(1, 2, 2, 3)).contiguous(memory_format=torch.channels_last) * 2
    assert out.stride() == ref.stride()
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=TOL)
    _, pullback = aotjax.vjp(lambda x: x.clone(memory_format=aotjax.channels_last).sum(), x)
    np.testing.assert_array_equal(pullback(aotjax.tensor(1.0, dtype=FLOAT))[0].numpy(), np.ones((1, 2, 2, 3)))


# -- device ----------------------------------------------------------------------------------------------------
def test_device_arguments():
    cpu = jax.devices("cpu")[0]
    for spec in ("cpu", "cpu:0", cpu, torch.device("cpu"), 0):
        assert aotjax.device(spec) == cpu
        for t in (aotjax.zeros(2, device=spec), aotjax.ones(2, 2, device=spec), aotjax.full((2,), 3, device=spec),
                  aotjax.arange(3, device=spec), aotjax.eye(2, device=spec), aotjax.tensor([1.0], device=spec),
                  aotjax.empty(2, device=spec), aotjax.zeros_like(aotjax.ones(2), device=spec),
                  aotjax.linspace(0, 1, 3, device=spec), aotjax.ones(1).new_zeros(2, device=spec)):
            assert t.device == cpu and t.devices() == {cpu}
    x = aotjax.ones(2)
    assert x.device == aotjax.device("cpu") and str(x.device) == "cpu:0"
    assert x.to("cpu") is x and x.to(cpu) is x and x.to(device="cpu:0") is x and x.to(x) is x
    y = x.to("cpu", aotjax.int32)
    assert y.dtype == np.int32 and y.device == cpu
    with pytest.raises(ValueError, match=r"to: unknown device 'cuda:7'.*the devices jax has here are cpu:0"):
        x.to("cuda:7")
    with pytest.raises(ValueError, match="zeros: unknown device 'meta'"):
        aotjax.zeros(2, device="meta")
    # under a transform the placement follows the arguments: `x.device` is None, and device= is accepted
    f = aotjax.jit(lambda x: (x.to(x.device) + aotjax.ones(2, device=x.device)).to("cpu"))
    np.testing.assert_array_equal(f(x).numpy(), [2.0, 2.0])


# -- dtype= on reductions and softmax ----------------------------------------------------------------------------
REDUCTIONS = {
    "sum": lambda m, x, d: m.sum(x, dtype=d), "sum_dim": lambda m, x, d: x.sum(1, dtype=d),
    "prod": lambda m, x, d: m.prod(x, 0, dtype=d), "mean": lambda m, x, d: m.mean(x, dtype=d),
    "cumsum": lambda m, x, d: m.cumsum(x, 1, dtype=d), "cumprod": lambda m, x, d: x.cumprod(0, dtype=d),
    "nansum": lambda m, x, d: m.nansum(x, dtype=d), "softmax": lambda m, x, d: m.softmax(x, 1, dtype=d),
    "log_softmax": lambda m, x, d: m.log_softmax(x, 0, dtype=d),
    "norm": lambda m, x, d: m.norm(x.float() if m is torch and not x.is_floating_point() else x, dtype=d),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_dtype_matches_torch(name):
    fn = REDUCTIONS[name]
    for data in (np.array([[1, -2, 3], [4, 0, 2]], INT), _f(2, 3)):
        for a_dt, t_dt in ((aotjax.float32, torch.float32), (aotjax.float64, torch.float64)):
            if name == "norm" and (data.dtype.kind == "i" or data.dtype.itemsize > t_dt.itemsize):
                continue  # torch's norm takes floats only, and a dtype that does not narrow them
            a, t = _both(data)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # float64 without x64 is truncated to float32, with a warning
                out = fn(aotjax, a, a_dt)
            _close(out, fn(torch, t, t_dt), f"{name} {data.dtype} -> {t_dt}")
    # the input is cast first, as in torch: an int tensor sums in float, a float one in the given int dtype
    assert aotjax.sum(aotjax.tensor([1.5, 2.5]), dtype=torch.int32).item() == torch.sum(
        torch.tensor([1.5, 2.5]), dtype=torch.int32).item()


# -- out= ------------------------------------------------------------------------------------------------------
OUT_OPS = {
    "add": (lambda m, x, y, **k: m.add(x, y, alpha=2, **k), 2), "mul": (lambda m, x, y, **k: m.mul(x, y, **k), 2),
    "exp": (lambda m, x, **k: m.exp(x, **k), 1), "eq": (lambda m, x, y, **k: m.eq(x, y, **k), 2),
    "sum": (lambda m, x, **k: m.sum(x, 1, **k), 1), "amax": (lambda m, x, **k: m.amax(x, 0, **k), 1),
    "cumsum": (lambda m, x, **k: m.cumsum(x, 1, **k), 1), "matmul": (lambda m, x, y, **k: m.matmul(x, y.T, **k), 2),
    "cat": (lambda m, x, y, **k: m.cat([x, y], 0, **k), 2), "stack": (lambda m, x, y, **k: m.stack([x, y], **k), 2),
    "clamp": (lambda m, x, **k: m.clamp(x, -0.5, 0.5, **k), 1),
    "where": (lambda m, x, y, **k: m.where(x > y, x, y, **k), 2),
}


@pytest.mark.parametrize("name", list(OUT_OPS))
def test_out_matches_torch(name):
    fn, arity = OUT_OPS[name]
    pairs = [_both(_f(2, 3, seed=s)) for s in range(arity)]
    xs, ts = [p[0] for p in pairs], [p[1] for p in pairs]
    ref = fn(torch, *ts)
    dtype = aotjax.float32 if ref.dtype == torch.float32 else _expected_dtype(ref.dtype)
    out = aotjax.zeros(*ref.shape, dtype=dtype)
    assert fn(aotjax, *xs, out=out) is out
    _close(out, ref, name)
    empty = aotjax.empty(0, dtype=dtype)  # an empty out is resized silently
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fn(aotjax, *xs, out=empty)
    _close(empty, ref, name)


def test_out_semantics():
    x, t = _both(_f(2, 3))
    out = aotjax.zeros(5, dtype=FLOAT)
    with pytest.warns(UserWarning, match=r"add: an output with one or more elements was resized"):
        aotjax.add(x, 1, out=out)  # torch resizes a nonempty out of the wrong shape, with a warning
    _close(out, t + 1)
    vals, idx = aotjax.zeros(3, dtype=FLOAT), aotjax.zeros(3, dtype=INT)
    res = aotjax.max(x, 0, out=(vals, idx))  # ops with several results take a tuple
    ref = torch.max(t, 0)
    assert res.values is vals and res.indices is idx
    _close(vals, ref.values)
    _close(idx, ref.indices)
    i_out = aotjax.zeros(2, 3, dtype=FLOAT)
    aotjax.lt(x, 0, out=i_out)  # bool results cast into a float out, as in torch
    _close(i_out, torch.lt(t, 0).to(t.dtype))
    with pytest.raises(DTypeError, match=r"add: the result type float.. can't be cast to the desired output type"):
        aotjax.add(x, 1, out=aotjax.zeros(2, 3, dtype=aotjax.int32))
    with pytest.raises(TypeError, match="out= must be a tuple of 2 tensors"):
        aotjax.max(x, 0, out=vals)
    assert aotjax.mul(x, 2, out=x) is x  # out may be an operand
    _close(x, t * 2)

    # under jit, out= is an in-place write into the argument; of the wrong shape, a clear error
    f = aotjax.jit(lambda x, o: aotjax.mul(x, 3, out=o))
    o = aotjax.zeros(2, 3, dtype=FLOAT)
    f(x, o)
    _close(o, t * 6)
    with pytest.raises(UnsupportedError, match=r"mul: out= has shape \[2\] .* a traced tensor cannot be resized"):
        f(x, aotjax.zeros(2, dtype=FLOAT))


# -- to(copy=True), casts, methods ------------------------------------------------------------------------------
@asks_for_64_bits
def test_to_copy_and_casts():
    x = aotjax.tensor([1.0, 2.0])
    for y in (x.to(x.dtype, copy=True), x.to(copy=True), x.to("cpu", copy=True), x.to(x, False, True)):
        assert y is not x
        y.add_(1)  # a new tensor: x is unchanged
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    assert x.to(x.dtype) is x and x.to(x.dtype, copy=False) is x
    a, t = _both(np.array([-3.7, 0.2, 100.9, 5.5], np.float32))
    for name in ("short", "byte", "char", "half", "int", "bool", "float", "long", "double"):
        data = a.abs() if name == "byte" else a  # torch's float -> uint8 of a negative value is undefined
        ref = getattr(t.abs() if name == "byte" else t, name)()
        _close(getattr(data, name)(), ref, name)
    assert (aotjax.int16, aotjax.uint8, aotjax.int8) == (np.dtype(np.int16), np.dtype(np.uint8), np.dtype(np.int8))


def test_inplace_methods_match_torch():
    a, t = _both(_f(3, 4))
    for name, args in (("tril_", ()), ("triu_", (1,)), ("tril_", (-1,)), ("cumsum_", (1,)), ("cumsum_", (-2,))):
        x, y = a.clone(), t.clone()
        assert getattr(x, name)(*args) is x
        _close(x, getattr(y, name)(*args), name)
    m, mt = _both(np.array([[0, 1, 0], [2, 0, 3]], INT))
    _close(m.nonzero(), mt.nonzero())
    for got, ref in zip(m.nonzero(as_tuple=True), mt.nonzero(as_tuple=True)):
        _close(got, ref)


def test_numpy_bfloat16_input():
    data = np.array([1.5, -2.25, 3.0], dtype=ml_dtypes.bfloat16)
    for t in (aotjax.tensor(data), aotjax.as_tensor(data), aotjax.tensor(data, dtype=aotjax.float32)):
        np.testing.assert_array_equal(t.numpy().astype(np.float32), [1.5, -2.25, 3.0])
    assert aotjax.tensor(data).dtype == aotjax.bfloat16
    _close(aotjax.tensor(data).float() * 2, torch.tensor([1.5, -2.25, 3.0], dtype=torch.bfloat16).float() * 2)


def test_index_put_boolean_mask_matches_torch():
    a, t = _both(_f(3, 4))
    cases = [
        (lambda m, x: x.index_put_((x > 0,), m.tensor(0.0, dtype=x.dtype)), "inplace"),
        (lambda m, x: x.index_put((x < 0,), m.tensor(1.5, dtype=x.dtype), accumulate=True), "accumulate"),
        (lambda m, x: x.index_put_((x[:, 0] > 0,), m.ones(4, dtype=x.dtype)), "rows"),
        (lambda m, x: x.index_put_((x[:, 1] > 0,), m.arange(4, dtype=x.dtype), accumulate=True), "rows_add"),
    ]
    for fn, how in cases:
        ref = fn(torch, t.clone())
        _close(fn(aotjax, a.clone()), ref, how)  # eager
        _close(aotjax.jit(lambda x, fn=fn: fn(aotjax, x))(a.clone()), ref, how + " jit")  # the mask is traced

    def setitem(x):
        x[x > 0.5] = -1.0
        return x
    _close(aotjax.jit(setitem)(a.clone()), setitem(t.clone()))
    _, pullback = aotjax.vjp(lambda x: x.index_put((x > 0,), aotjax.tensor(0.0, dtype=x.dtype)), a)
    np.testing.assert_array_equal(pullback(aotjax.ones(3, 4, dtype=FLOAT))[0].numpy(), (a.numpy() <= 0).astype(FLOAT))
