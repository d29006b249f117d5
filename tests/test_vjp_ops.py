"""Every op of the op table with a `jax` reference (tests/op_records.py), in reverse mode: `aotjax.vjp`
(linearize + transpose) against `jax.vjp` of the same math in `jax.numpy`, on random inputs and cotangents
of the mode's float (float64 with x64, float32 without)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from tests.op_records import as_np, derivative_inputs, flat, records, sample_f64, skip_without_x64

T = aotjax.tensor


@pytest.mark.parametrize("row", records(differentiated=True), ids=repr)
def test_vjp(row):
    skip_without_x64(row)
    primals = derivative_inputs(row)
    outs, f_vjp = aotjax.vjp(lambda *xs: tuple(flat(row.fn(*xs))), *[T(p) for p in primals])
    ref_outs, ref_vjp = jax.vjp(lambda *xs: tuple(flat(row.jax(*xs))), *map(jnp.asarray, primals))
    cts = tuple(T(sample_f64("any", o.shape, seed=200 + k).astype(o.dtype)) if np.issubdtype(o.dtype, np.floating)
                else aotjax.zeros(*o.shape, dtype=o.dtype) for k, o in enumerate(outs))
    ref_cts = tuple(jnp.asarray(as_np(c)) if np.issubdtype(o.dtype, np.floating) else
                    np.zeros(o.shape, jax.dtypes.float0) for c, o in zip(cts, ref_outs))
    got, want = f_vjp(cts), ref_vjp(ref_cts)
    for g, w, p in zip(got, want, primals, strict=True):
        assert g.shape == np.shape(p)
        tol = 1e-6 if all(np.dtype(o.dtype) == np.float64 for o in outs if np.issubdtype(o.dtype, np.floating)) \
            else 1e-5
        np.testing.assert_allclose(as_np(g), np.asarray(w), rtol=tol, atol=tol * 1e-3)
