"""`BatchNorm1d` and `BatchNorm2d`, as `torch.nn`'s: running statistics updated in place in training."""
from __future__ import annotations

from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.parameter import Parameter
from aotjax.ops.base.promotion import default_int_dtype
from aotjax.ops.creation.factories import empty, ones, zeros
from aotjax.ops.nn.normalization import batch_norm

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


class _BatchNorm(Module):
    """Normalizes each channel (dim 1) by batch statistics in training and by running estimates in
    evaluation; see `BatchNorm1d`."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(empty(num_features, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_features, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", zeros((), dtype=default_int_dtype()))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean to zeros, running variance to ones, `num_batches_tracked` to 0 (in place)."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Reset the running statistics; weight to ones, bias to zeros."""
        self.reset_running_stats()
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def _check_input_dim(self, input) -> None:
        raise NotImplementedError

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # NOTE: a cumulative average; a tensor: the count may be traced
                factor = 1.0 / self.num_batches_tracked
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                          self.weight, self.bias, use_batch_stats, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization over a 2-D `[N, C]` or 3-D `[N, C, L]` input, as `torch.nn.BatchNorm1d`: in
    training, each channel is normalized by the batch's mean and biased variance, and (with
    `track_running_stats`) `running_mean`, `running_var` (from the unbiased variance) and `num_batches_tracked`
    are updated in place (`momentum=None`: a cumulative average); in evaluation the running estimates
    normalize. Under `aotjax.jit(f)(model, x)` the updates are written back to `model`'s buffers.

    >>> bn = aotjax.nn.BatchNorm1d(2)
    >>> _ = bn(aotjax.tensor([[0.0, 1.0], [2.0, 5.0]]))
    >>> bn.running_mean, bn.num_batches_tracked.item()
    (tensor([0.1, 0.3]), 1)
    """

    def _check_input_dim(self, input) -> None:
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalization over a 4-D `[N, C, H, W]` input (see `BatchNorm1d`).

    >>> aotjax.nn.BatchNorm2d(3)(aotjax.ones(2, 3, 4, 4)).shape
    (2, 3, 4, 4)
    """

    def _check_input_dim(self, input) -> None:
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalization over a 5-D `[N, C, D, H, W]` input (see `BatchNorm1d`).

    >>> aotjax.nn.BatchNorm3d(3)(aotjax.ones(2, 3, 1, 2, 2)).shape
    (2, 3, 1, 2, 2)
    """

    def _check_input_dim(self, input) -> None:
        if input.ndim != 5:
            raise ValueError(f"expected 5D input (got {input.ndim}D input)")
