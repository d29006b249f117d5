"""User-facing transforms, each built from interpreters."""
from aotjax.transforms.aot import aot, aot_function, aot_module, xla_compiler
from aotjax.transforms.autodiff import grad, hessian, jacfwd, jacrev, jvp, linearize, stop_gradient, value_and_grad, vjp
from aotjax.transforms.checkpoint import checkpoint, checkpoint_name, checkpoint_policies, remat
from aotjax.transforms.custom_derivatives import custom_jvp, custom_vjp
from aotjax.transforms.export import Exported, deserialize, export
from aotjax.transforms.forward_backward import forward_backward, print_saved_residuals, saved_residuals
from aotjax.transforms.functionalize import functionalize
from aotjax.transforms.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from aotjax.transforms.jit import jit
from aotjax.transforms.make_jaxpr import make_jaxpr
from aotjax.transforms.vmap import vmap
