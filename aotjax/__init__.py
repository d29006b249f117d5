"""aotjax: PyTorch-style mutable tensors under JAX-style composable function transforms."""
from aotjax.tensor import Tensor  # noqa: I001  (the import order sets up the interpreter stack)
from aotjax.interpreters import eval as _eval  # noqa: F401
from aotjax.core import ClosedJaxpr, Jaxpr, ShapedArray, eval_jaxpr, typecheck
from aotjax.ops import *  # noqa: F401,F403
from aotjax.ops import random  # noqa: F401
import aotjax.nn as nn  # noqa: F401  (the package; the star import above brings the aotjax.ops.nn module)
from aotjax.dtypes import *  # noqa: F401,F403
from aotjax.transforms import (functionalize, grad, hessian, jacfwd, jacrev, jit, jvp, linearize, make_jaxpr,
                               stop_gradient, value_and_grad, vjp)
from aotjax.lowering import compile, to_jax  # noqa: F401
from aotjax.transforms import aot, aot_function, aot_module, xla_compiler  # noqa: F401
import aotjax.partition as partition  # noqa: F401
from aotjax.transforms import custom_jvp, custom_vjp  # noqa: F401
from aotjax.transforms import (checkpoint, checkpoint_name, checkpoint_policies, forward_backward,  # noqa: F401
                               print_saved_residuals, remat, saved_residuals)

__version__ = "0.1.0"
