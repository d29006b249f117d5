"""The functional forms of neural-network layers and losses, as `torch.nn.functional`.

>>> import aotjax.nn.functional as F
>>> F.softmax(aotjax.tensor([1.0, 1.0]), dim=-1)
tensor([0.5, 0.5])
"""
from aotjax import ops
from aotjax.ops.activations import FUNCTIONAL as _ACTIVATION_FNS
from aotjax.ops.activations import (  # noqa: F401
    celu,
    celu_,
    elu,
    elu_,
    glu,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    hardtanh_,
    leaky_relu,
    leaky_relu_,
    logsigmoid,
    mish,
    prelu,
    relu6,
    rrelu,
    rrelu_,
    selu,
    selu_,
    softmin,
    softplus,
    softshrink,
    softsign,
    tanhshrink,
    threshold,
    threshold_,
)
from aotjax.ops.conv import FUNCTIONAL as _CONV
from aotjax.ops.conv import conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d  # noqa: F401
from aotjax.ops.extra_nn import FUNCTIONAL as _EXTRA
from aotjax.ops.extra_nn import (  # noqa: F401
    affine_grid,
    bilinear,
    channel_shuffle,
    ctc_loss,
    grid_sample,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
    multilabel_margin_loss,
    pdist,
    triplet_margin_with_distance_loss,
    upsample_bilinear,
    upsample_nearest,
)
from aotjax.ops.linalg import linear  # noqa: F401
from aotjax.ops.losses import FUNCTIONAL as _LOSSES
from aotjax.ops.losses import (  # noqa: F401
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_embedding_loss,
    cosine_similarity,
    gaussian_nll_loss,
    hinge_embedding_loss,
    huber_loss,
    kl_div,
    l1_loss,
    margin_ranking_loss,
    multi_margin_loss,
    multilabel_soft_margin_loss,
    nll_loss,
    pairwise_distance,
    poisson_nll_loss,
    smooth_l1_loss,
    soft_margin_loss,
    triplet_margin_loss,
)
from aotjax.ops.nn import (  # noqa: F401
    FUNCTIONAL,
    batch_norm,
    cross_entropy,
    dropout,
    embedding,
    layer_norm,
    log_softmax,
    mse_loss,
    rms_norm,
    scaled_dot_product_attention,
    softmax,
)
from aotjax.ops.normalization import FUNCTIONAL as _NORMALIZATION
from aotjax.ops.normalization import (  # noqa: F401
    alpha_dropout,
    dropout1d,
    dropout2d,
    dropout3d,
    embedding_bag,
    feature_alpha_dropout,
    group_norm,
    instance_norm,
    local_response_norm,
    normalize,
    one_hot,
)
from aotjax.ops.pooling import FUNCTIONAL as _POOLING
from aotjax.ops.pooling import (  # noqa: F401
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    fold,
    max_pool1d,
    max_pool2d,
    max_pool3d,
    unfold,
)
from aotjax.ops.resampling import FUNCTIONAL as _RESAMPLING
from aotjax.ops.resampling import interpolate, pad, pixel_shuffle, pixel_unshuffle, upsample  # noqa: F401

__all__ = list(FUNCTIONAL) + _CONV + _POOLING + _RESAMPLING + _ACTIVATION_FNS + _LOSSES + _NORMALIZATION + _EXTRA

# Activations are elementwise ops of `aotjax` itself; `F.relu(x)` is `aotjax.relu(x)`, as in PyTorch.
_ACTIVATIONS = ("relu", "gelu", "silu", "sigmoid", "tanh", "relu_", "silu_")


def __getattr__(name: str):
    if name in _ACTIVATIONS:
        return getattr(ops, name)
    raise AttributeError(f"module 'aotjax.nn.functional' has no attribute {name!r}")
