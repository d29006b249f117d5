"""Op records of the convolution family's primitive, `conv` (its forward is tested against torch in
tests/ops/test_conv_vs_torch.py): derivatives against `jax.lax.conv_general_dilated` and the dot-product test of
both transposes, for a strided, dilated, grouped convolution and for a transposed one (input dilation)."""
from __future__ import annotations

import jax

import aotjax.nn.functional as F
from tests.op_records import L0_1, op

_DN = ("NCHW", "OIHW", "NCHW")

RECORDS = [
    op("conv2d_grouped", lambda x, w: F.conv2d(x, w, stride=(2, 1), padding=1, dilation=(1, 2), groups=2),
       lambda x, w: jax.lax.conv_general_dilated(x, w, (2, 1), ((1, 1), (1, 1)), rhs_dilation=(1, 2),
                                                 dimension_numbers=_DN, feature_group_count=2),
       ((2, 4, 5, 6), (4, 2, 2, 3)), linear=L0_1, prim="conv"),
    op("conv_transpose1d", lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1),
       lambda x, w: jax.lax.conv_general_dilated(x, jax.numpy.flip(w, -1).transpose(1, 0, 2), (1,), ((1, 2),),
                                                 lhs_dilation=(2,), dimension_numbers=("NCH", "OIH", "NCH")),
       ((2, 3, 4), (3, 2, 3)), linear=L0_1, prim="conv"),
]
