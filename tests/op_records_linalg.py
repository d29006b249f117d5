"""Op records of the `from_jax` primitives (aotjax/ops/linalg/decompositions.py): `det` and `solve` with jax references
(the jvp/vjp/vmap sweeps), and each primitive's tangent map `X_jvp` transposed by the dot-product test. Their
values are checked against torch in tests/ops/test_linalg_vs_torch.py."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import aotjax
from tests.op_records import op


def _mat(n=3, seed=0):
    a = np.random.default_rng(seed).standard_normal((n, n))
    return a + n * np.eye(n)


def _spd(n=3, seed=0):
    a = np.random.default_rng(seed).standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


def _tangent_map(fn):
    """The tangent of `fn`'s floating results at `x` along `t`, flattened into one vector: linear in `t`."""
    def tangent(x, t, *rest):
        outs = aotjax.jvp(lambda x: fn(x, *rest), (x,), (t,))[1]
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        return aotjax.cat([o.reshape(-1) for o in outs if np.issubdtype(o.dtype, np.floating)])
    return tangent


L = aotjax.linalg
_sym = lambda f: lambda x: f((x + x.mT) / 2)  # noqa: E731
_TANGENT_MAPS = [
    ("cholesky", _sym(L.cholesky), _spd),
    ("qr", L.qr, _mat),
    ("svd", lambda x: L.svd(x, full_matrices=False), _mat),
    ("svdvals", L.svdvals, _mat),
    ("eigh", _sym(L.eigh), _spd),
    ("eigvalsh", _sym(L.eigvalsh), _spd),
    ("det", L.det, _mat),
    ("slogdet", L.slogdet, _mat),
    ("inv", L.inv, _mat),
    ("solve", lambda x: L.solve(x, aotjax.ones(3, 2, dtype=x.dtype)), _mat),
    ("solve_triangular", lambda x: L.solve_triangular(x, aotjax.ones(3, 2, dtype=x.dtype), upper=True), _mat),
    ("lu_factor", L.lu_factor, _mat),
    ("lu", L.lu, _mat),
    ("lu_solve", lambda x: L.lu_solve(*L.lu_factor(aotjax.eye(3, dtype=x.dtype) * 2), x), _mat),
    ("matrix_exp", L.matrix_exp, lambda: _mat() / 3),
    ("cholesky_solve", lambda x: aotjax.cholesky_solve(aotjax.ones(3, 2, dtype=x.dtype), x), _mat),
    ("pinv", L.pinv, _mat),
    ("pinv_tolerances", lambda x: L.pinv(x, atol=aotjax.tensor(0.1, dtype=x.dtype)), _mat),
    ("vector_norm", lambda x: L.vector_norm(x, ord=3), _mat),
    ("matrix_norm", lambda x: L.matrix_norm(x, ord="nuc"), _mat),
]

RECORDS = [
    op("linalg_det", L.det, jnp.linalg.det, shapes=((3, 3),), inputs=lambda: [_mat()]),
    op("linalg_solve", L.solve, jnp.linalg.solve, shapes=((3, 3), (3, 2)), inputs=lambda: [_mat(), np.ones((3, 2))]),
] + [
    op(f"{name}_tangent", _tangent_map(fn), None, inputs=lambda make=make: [make(), _mat(seed=1)], linear=((1,),),
       prim=f"{name}_jvp")
    for name, fn, make in _TANGENT_MAPS
]
