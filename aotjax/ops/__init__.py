"""Primitives grouped by family. Each family module defines its primitives with every rule beside
them, and the user-facing op functions (most are also Tensor methods, which the family installs)."""
from aotjax.ops import (
    _frontend,
    activations,
    arrangement,
    collectives,
    complex_numbers,
    control_flow,
    conv,
    creation,
    custom_derivatives,  # registers the custom_jvp/custom_vjp primitives
    decompositions,
    distributions,
    elementwise,
    extra_linalg,  # noqa: F401  (aotjax.linalg's names only)
    extra_nn,
    extra_special,
    factories,
    fft,
    generator,
    indexing,
    linalg,
    losses,
    masked_ops,  # torch.masked's reductions (aotjax.masked)
    misc_ops,
    nn,
    normalization,
    pointwise,
    pooling,
    products,
    random,
    reduction,
    remat,
    resampling,
    scatter_ops,
    shape,
    shard_map,  # registers the shard_map primitive
    sharding,
    sorting,
    special_ops,  # torch.special's polynomials and Bessel functions (aotjax.special), sgn
    statistics,
    views,
)
from aotjax.ops._frontend import *  # noqa: F403
from aotjax.ops.activations import *  # noqa: F403
from aotjax.ops.arrangement import *  # noqa: F403
from aotjax.ops.complex_numbers import *  # noqa: F403
from aotjax.ops.conv import *  # noqa: F403
from aotjax.ops.creation import *  # noqa: F403
from aotjax.ops.decompositions import *  # noqa: F403
from aotjax.ops.distributions import *  # noqa: F403
from aotjax.ops.elementwise import *  # noqa: F403
from aotjax.ops.extra_nn import *  # noqa: F403
from aotjax.ops.extra_special import *  # noqa: F403
from aotjax.ops.factories import *  # noqa: F403
from aotjax.ops.fft import *  # noqa: F403
from aotjax.ops.generator import *  # noqa: F403
from aotjax.ops.indexing import *  # noqa: F403
from aotjax.ops.linalg import *  # noqa: F403
from aotjax.ops.losses import *  # noqa: F403
from aotjax.ops.misc_ops import *  # noqa: F403
from aotjax.ops.nn import *  # noqa: F403
from aotjax.ops.normalization import *  # noqa: F403
from aotjax.ops.pointwise import *  # noqa: F403
from aotjax.ops.pooling import *  # noqa: F403
from aotjax.ops.products import *  # noqa: F403
from aotjax.ops.promotion import default_float_dtype, default_int_dtype, result_type
from aotjax.ops.reduction import *  # noqa: F403
from aotjax.ops.resampling import *  # noqa: F403
from aotjax.ops.scatter_ops import *  # noqa: F403
from aotjax.ops.shape import *  # noqa: F403
from aotjax.ops.sorting import *  # noqa: F403
from aotjax.ops.special_ops import resolve_neg, sgn, sgn_  # noqa: F401
from aotjax.ops.statistics import *  # noqa: F403
from aotjax.ops.views import *  # noqa: F403

globals().update(_frontend.with_out_variants(globals()))  # `aotjax.add(x, y, out=z)`: torch's out= keyword

# NOTE: what `from aotjax.ops import *` gives: the op functions, not the family modules (so that the
# `aotjax.ops.nn` module never shadows the `aotjax.nn` package, whatever the import order).
__all__ = [name for family in (_frontend, conv, creation, decompositions, elementwise, generator, indexing, linalg, nn,
                               pooling, products, reduction, resampling, scatter_ops, shape, sorting, statistics, views)
           for name in family.__all__] + ["random", "default_float_dtype", "default_int_dtype", "result_type"]
__all__ += pointwise.__all__
__all__ += [name for family in (activations, losses, normalization) for name in family.__all__]
__all__ += distributions.__all__ + factories.__all__
__all__ += arrangement.__all__
__all__ += misc_ops.__all__
__all__ += extra_nn.__all__ + extra_special.__all__
__all__ += complex_numbers.__all__
__all__ += fft.__all__
__all__ += special_ops.TOP_LEVEL
