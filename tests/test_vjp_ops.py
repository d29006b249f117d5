"""Every op of the jvp table, in reverse mode: `aotjax.vjp` (linearize + transpose) against `jax.vjp`
of the same math in `jax.numpy`, on random float64 inputs and cotangents."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from tests.interpreters.test_jvp import ROWS, _as_np, _flat, _inputs, sample

T = aotjax.tensor


@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_vjp(row):
    primals = _inputs(row)
    outs, f_vjp = aotjax.vjp(lambda *xs: tuple(_flat(row.fn(*xs))), *[T(p) for p in primals])
    ref_outs, ref_vjp = jax.vjp(lambda *xs: tuple(_flat(row.ref(*xs))), *map(jnp.asarray, primals))
    cts = tuple(T(sample("any", o.shape, seed=200 + k).astype(o.dtype)) if np.issubdtype(o.dtype, np.floating) else
                aotjax.zeros(*o.shape, dtype=o.dtype) for k, o in enumerate(outs))
    ref_cts = tuple(jnp.asarray(_as_np(c)) if np.issubdtype(o.dtype, np.floating) else
                    np.zeros(o.shape, jax.dtypes.float0) for c, o in zip(cts, ref_outs))
    got, want = f_vjp(cts), ref_vjp(ref_cts)
    for g, w, p in zip(got, want, primals, strict=True):
        assert g.shape == np.shape(p)
        tol = 1e-6 if all(np.dtype(o.dtype) == np.float64 for o in outs if np.issubdtype(o.dtype, np.floating)) \
            else 1e-5
        np.testing.assert_allclose(_as_np(g), np.asarray(w), rtol=tol, atol=tol * 1e-3)
