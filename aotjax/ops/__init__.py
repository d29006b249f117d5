"""Primitives and op functions by subject, one folder a subject (`base`, `creation`, `shape`, `math`, `reduce`,
`linalg`, `indexing`, `nn`, `random`, `fft`, `control_flow`, `distributed`, `calls`). Each family module defines its
primitives with every rule in the primitive's block, and the op functions, which it installs as Tensor methods and
lists in `__all__` (the `aotjax.X` names) or `FUNCTIONAL` (`aotjax.nn.functional.X`). Importing this package loads
every family, so every primitive's rules are registered. `python -m aotjax where NAME` says where any op is."""
from aotjax.ops.base import casts, data
from aotjax.ops.base import frontend as _frontend
from aotjax.ops.base.promotion import default_float_dtype, default_int_dtype, result_type
from aotjax.ops.calls import compiled, custom_derivatives, remat  # noqa: F401  (register the call primitives)
from aotjax.ops.control_flow import cond, scan, while_loop  # noqa: F401
from aotjax.ops.creation import factories
from aotjax.ops.distributed import collectives, shard_map, sharding  # noqa: F401  (aotjax.lax's names)
from aotjax.ops.fft import fourier
from aotjax.ops.indexing import gather_scatter, subscripts
from aotjax.ops.linalg import compact, decompositions, lapack, lowrank, matmul, norms, products, solvers  # noqa: F401  (solvers, norms: aotjax.linalg's names)
from aotjax.ops.math import complex as complex_numbers
from aotjax.ops.math import elementwise, functions, special
from aotjax.ops.nn import activations, attention, conv, linear, losses, normalization, pooling, resampling, sparse
from aotjax.ops.random import distributions, generator
from aotjax.ops.random import keys as random
from aotjax.ops.reduce import masked, reductions, sorting, statistics  # noqa: F401  (masked: aotjax.masked's names)
from aotjax.ops.shape import arrangement, copies, views
from aotjax.ops.shape import clone as cloning

# NOTE: the families whose `__all__` is aotjax's top level, in this order: where two define one name, the later wins
# (`cholesky` of torch's top level, with `upper=`, over torch.linalg's).
FAMILIES = (_frontend, casts, data, activations, arrangement, complex_numbers, conv, factories, decompositions,
            distributions, elementwise, linear, fourier, generator, subscripts, matmul, losses, lapack, compact,
            lowrank, attention, sparse, normalization, functions, pooling, products, reductions, resampling,
            gather_scatter, cloning, copies, sorting, statistics, views)
for _family in FAMILIES:
    globals().update({name: getattr(_family, name) for name in _family.__all__})
globals().update({name: getattr(special, name) for name in special.TOP_LEVEL})
globals().update(_frontend.with_out_variants(globals()))  # `aotjax.add(x, y, out=z)`: torch's out= keyword

# NOTE: what `from aotjax.ops import *` gives: the op functions, not the family modules (so that no module of this
# package shadows a public namespace such as `aotjax.nn`, whatever the import order).
__all__ = [name for family in FAMILIES for name in family.__all__] + list(special.TOP_LEVEL)
__all__ += ["random", "default_float_dtype", "default_int_dtype", "result_type"]
del _family
