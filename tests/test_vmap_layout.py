"""Layout under vmap, as PyTorch's vmap: `stride()`, `is_contiguous()` and view-or-copy decisions inside the function
are per example; outputs that alias inputs."""
from __future__ import annotations

import numpy as np
import pytest

import aotjax
from tests.helpers import FLOAT
from tests.op_records import as_np

T = aotjax.tensor


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_strides_and_view_or_copy_inside_vmap_are_per_example_as_torch(axis):
    import torch

    x = np.arange(24.0, dtype=FLOAT).reshape(2, 3, 4)

    def layout(seen):
        def f(a):
            seen.append((tuple(a.stride()), a.is_contiguous(), tuple(a.t().stride()), tuple(a[:, 1:].stride())))
            return a.reshape(-1)
        return f

    ours, theirs = [], []
    got = aotjax.vmap(layout(ours), in_axes=axis)(T(x))
    ref = torch.func.vmap(layout(theirs), in_dims=axis)(torch.tensor(x))
    assert ours == theirs
    np.testing.assert_array_equal(as_np(got), ref.numpy())
    view_ok = theirs[0][1] or axis == 2  # torch: a view of a non-contiguous example needs compatible strides
    if view_ok:
        np.testing.assert_array_equal(as_np(aotjax.vmap(lambda a: a.view(-1), in_axes=axis)(T(x))),
                                      torch.func.vmap(lambda a: a.view(-1), in_dims=axis)(torch.tensor(x)).numpy())
    else:
        with pytest.raises(Exception, match="view"):
            torch.func.vmap(lambda a: a.view(-1), in_dims=axis)(torch.tensor(x))
        with pytest.raises(Exception, match="view"):
            aotjax.vmap(lambda a: a.view(-1), in_axes=axis)(T(x))
