"""Op records of the arrangement family's primitives, `unfold` (a view; its forward and aliasing are tested against
torch in tests/ops/test_shape_vs_torch.py) and `unfold_scatter` (its inverse: the write through it): derivatives
against jax and the dot-product tests of their transposes, with overlapping windows (whose cotangents add up) for
`unfold` and with a gap between windows for the scatter."""
from __future__ import annotations

import numpy as np

from aotjax.ops.shape.arrangement import unfold_scatter_p
from tests.op_records import L0, L01, op, view

_OVERLAPPING = np.arange(3)[:, None] + np.arange(3)  # size 3, step 1 over a length-5 dim: 3 windows
_SPACED = (np.arange(2)[:, None] * 3 + np.arange(2)).reshape(-1)  # size 2, step 3 over a length-5 dim: 2 windows

RECORDS = [
    view("unfold_overlapping", [(2, 5)], lambda x: x.unfold(1, 3, 1), lambda a: a[:, _OVERLAPPING],
         lambda a: a[:, _OVERLAPPING], linear=L0, prim="unfold"),
    op("unfold_scatter", lambda b, y: unfold_scatter_p.bind(b, y, dim=1, size=2, step=3),
       lambda b, y: b.at[:, _SPACED].set(y.reshape(2, 4)), ((2, 5), (2, 2, 2)), linear=L01, prim="unfold_scatter"),
]
