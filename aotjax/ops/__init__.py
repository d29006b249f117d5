"""Primitives grouped by family. Each family module defines its primitives with every rule beside
them, and the user-facing op functions (which are also Tensor methods)."""
from aotjax.ops import (  # noqa: F401
    custom_derivatives,  # noqa: F401  (registers the custom_jvp/custom_vjp primitives)
    random,
    remat,
)
from aotjax.ops._frontend import *  # noqa: F401,F403
from aotjax.ops.creation import *  # noqa: F401,F403
from aotjax.ops.elementwise import *  # noqa: F401,F403
from aotjax.ops.indexing import *  # noqa: F401,F403
from aotjax.ops.linalg import *  # noqa: F401,F403
from aotjax.ops.nn import *  # noqa: F401,F403
from aotjax.ops.promotion import default_float_dtype, default_int_dtype, result_type  # noqa: F401
from aotjax.ops.reduction import *  # noqa: F401,F403
from aotjax.ops.shape import *  # noqa: F401,F403
from aotjax.ops.views import *  # noqa: F401,F403
