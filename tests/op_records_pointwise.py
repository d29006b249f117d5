"""Op records of the pointwise family's new primitives (aotjax/ops/math/functions.py) whose derivatives are written by
hand: the jvp/vjp/vmap sweeps check each rule against jax's own derivative of the same function. Their values are
checked against torch in tests/ops/test_elementwise_vs_torch.py."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp

import aotjax
from tests.op_records import op

RECORDS = [
    op("asin", aotjax.asin, jnp.arcsin, domain="unit"),
    op("erfinv", aotjax.erfinv, jax.lax.erf_inv, domain="unit"),
    op("lgamma_digamma", lambda x: (aotjax.lgamma(x), aotjax.digamma(x)), lambda x: (jax.lax.lgamma(x),
                                                                                    jax.lax.digamma(x)), domain="pos"),
    op("polygamma_2", lambda x: aotjax.polygamma(2, x), lambda x: jsp.polygamma(2, x), domain="pos"),
    op("i1e", aotjax.special.i1e, jax.lax.bessel_i1e, domain="nonzero"),
    op("logaddexp", aotjax.logaddexp, jnp.logaddexp, ((3, 4), (4,))),
]
