"""Op records of the complex and fft families' primitives (aotjax/ops/math/complex.py, aotjax/ops/fft/fourier.py,
`eig`/`eigvals` in aotjax/ops/linalg/decompositions.py): each record maps real inputs to real outputs (complex values
are built and taken apart with `view_as_complex`/`view_as_real`, themselves primitives here), so the derivative sweeps
and the dot-product test of each linear primitive run on real arrays. Values and derivatives against torch are in
tests/ops/test_complex_vs_torch.py and tests/ops/test_fft_vs_torch.py."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

import aotjax
from tests.op_records import L0, L01, op


def C(x):  # NOTE: contiguous first: an example of a vmap over the last axis has that axis's strides
    return aotjax.view_as_complex(x.contiguous())


R = aotjax.view_as_real
F = aotjax.fft


def _c(x):
    return lax.complex(x[..., 0], x[..., 1])


def _r(z):
    return jnp.stack([jnp.real(z), jnp.imag(z)], axis=-1)


def _mat(n=3, seed=0):
    return np.random.default_rng(seed).standard_normal((n, n)) + np.diag([1.0, 3.0, 5.0])


def _tangent(fn):
    """The tangent of `fn` (real to real) at `x` along `t`: linear in `t`."""
    def tangent(x, t):
        return aotjax.jvp(fn, (x,), (t,))[1]
    return tangent


def _pair(*shape):
    rng = np.random.default_rng(3)
    return lambda: [rng.standard_normal(shape), rng.standard_normal(shape)]


def _complex_tangent(fn):
    """The tangents of `fn`'s (complex) results at `x` along `t`, as reals in one vector: linear in `t`."""
    def tangent(x, t):
        outs = aotjax.jvp(fn, (x,), (t,))[1]
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        return aotjax.cat([R(o).reshape(-1) for o in outs])
    return tangent


_Z = ((3, 4, 2),)  # a (3, 4) complex operand, as reals
RECORDS = [
    op("complex_mul", lambda a, b: R(aotjax.complex(a, b) * (1 + 2j)), lambda a, b: _r(lax.complex(a, b) * (1 + 2j)),
       ((3, 4), (3, 4)), linear=L01, prim="complex"),
    op("view_as_complex_real", lambda x: (C(x) * (1 + 2j)).real, lambda x: jnp.real(_c(x) * (1 + 2j)), _Z,
       linear=L0, prim="view_as_complex"),
    op("real_of_product", lambda x: (C(x) * (2 - 1j)).real, None, _Z, linear=L0, prim="real"),
    op("imag_of_product", lambda x: (C(x) * (2 - 1j)).imag, lambda x: jnp.imag(_c(x) * (2 - 1j)), _Z, linear=L0,
       prim="imag"),
    op("conj_view", lambda x: R(C(x).conj() * 1j), None, _Z, linear=L0, prim="conj"),
    op("conj_physical", lambda x: R(aotjax.conj_physical(C(x) * 1j)), None, _Z, linear=L0, prim="conj_physical"),
    op("view_as_real_of_conj", lambda a, b: R(aotjax.complex(a, b).conj()), None, ((3, 4), (3, 4)), linear=L01,
       prim="view_as_real"),
    op("fft_c2c", lambda x: R(F.fft(C(x), norm="ortho")), lambda x: _r(jnp.fft.fft(_c(x), norm="ortho")), _Z),
    op("rfft", lambda x: R(F.rfft(x)), lambda x: _r(jnp.fft.rfft(x))),
    op("fft_tangent", _tangent(lambda x: R(F.fft(C(x)))), None, inputs=_pair(3, 4, 2), linear=((1,),),
       prim="fft_jvp"),
    op("rfft_tangent", _tangent(lambda x: R(F.rfft(x))), None, inputs=_pair(3, 4), linear=((1,),), prim="rfft_jvp"),
    op("irfft_tangent", _tangent(lambda x: F.irfft(C(x))), None, inputs=_pair(3, 3, 2), linear=((1,),),
       prim="irfft_jvp"),
    op("hfft_tangent", _tangent(lambda x: F.hfft(C(x))), None, inputs=_pair(3, 3, 2), linear=((1,),),
       prim="hfft_jvp"),
    op("ihfft_tangent", _tangent(lambda x: R(F.ihfft(x))), None, inputs=_pair(3, 4), linear=((1,),),
       prim="ihfft_jvp"),
    op("eig_tangent", _complex_tangent(aotjax.linalg.eig), None, inputs=lambda: [_mat(), _mat(seed=1)],
       linear=((1,),), prim="eig_jvp"),
    op("eigvals_tangent", _complex_tangent(aotjax.linalg.eigvals), None, inputs=lambda: [_mat(), _mat(seed=1)],
       linear=((1,),), prim="eigvals_jvp"),
]
