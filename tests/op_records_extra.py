"""Op records of `igamma`, `igammac`, `nextafter` and `frexp` (aotjax/ops/math/special.py): the jvp/vjp/vmap
sweeps check each rule against jax's own derivative of the same function. Their values are checked against torch in
tests/ops/test_extra_vs_torch.py, as are igamma's and igammac's derivatives (no record: compiling jax's gammainc
costs seconds per sweep)."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import aotjax
from tests.op_records import op
from tests.op_records_linalg import _tangent_map

RECORDS = [
    op("frexp_mantissa", lambda x: aotjax.frexp(x).mantissa * 1.0, lambda x: jnp.frexp(x)[0], domain="nonzero"),
    # frexp's tangent map `frexp_jvp`, transposed by the dot-product test
    op("frexp_tangent", _tangent_map(aotjax.frexp), None, linear=((1,),), prim="frexp_jvp",
       inputs=lambda: [np.array([[3.0, -0.1], [5.0, 40.0]]), np.array([[1.0, 2.0], [-1.0, 0.5]])]),
]
