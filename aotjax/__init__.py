"""aotjax: PyTorch-style mutable tensors under JAX-style composable function transforms."""
import gc as _gc
from types import SimpleNamespace as _SimpleNamespace

import jax as _jax  # noqa: F401  (first, its import as usual: see below)

# NOTE: aotjax's modules make some 30k objects that live as long as the process (functions, classes, the
# primitives' rule tables) and free none. Their allocations made the collector run a full pass over every object
# of the process in the middle of the import (about 50 ms here, a third of what importing aotjax costs beyond jax,
# for nothing to collect). The collector is paused while aotjax's own modules import, and runs again after as
# before: its next full pass comes when the program's own allocations call for one.
_collecting = _gc.isenabled()
_gc.disable()
try:
    import aotjax.accelerator as accelerator  # noqa: F401  (torch.accelerator: the device-agnostic device API)
    import aotjax.amp as amp  # noqa: F401  (torch.amp: autocast, GradScaler)
    import aotjax.autograd as autograd  # noqa: F401
    import aotjax.autograd.tensor_methods  # noqa: F401  (Tensor's autograd attributes)
    import aotjax.backends as backends  # noqa: F401  (torch.backends: precision flags a script sets)
    import aotjax.compiler as compiler  # noqa: F401,E402  (torch.compiler: is_compiling, disable)
    import aotjax.cuda as cuda  # noqa: F401  (torch.cuda: is_available() and what a script asks of a GPU)
    import aotjax.distributed as distributed  # noqa: F401  (torch.distributed: many processes on JAX's runtime)
    import aotjax.distributions as distributions  # noqa: F401  (torch.distributions: Normal, Categorical, KL)
    import aotjax.fft as fft  # noqa: F401  (the public torch.fft namespace, not the aotjax.ops.fft.fourier family)
    import aotjax.func as func  # noqa: F401
    import aotjax.linalg as linalg  # noqa: F401  (the public torch.linalg namespace, not the aotjax.ops.linalg.matmul family)
    import aotjax.masked as masked  # noqa: F401  (the public torch.masked namespace, plain tensors with mask=)
    import aotjax.nn as nn  # noqa: F401  (the package; `from aotjax.ops import *` gives no module of aotjax.ops)
    import aotjax.onnx as onnx  # noqa: F401  (`import torch.onnx` runs; its export says to export StableHLO)
    import aotjax.optim as optim  # noqa: F401
    import aotjax.partition as partition  # noqa: F401
    import aotjax.signal as signal  # noqa: F401  (the public torch.signal namespace: windows)
    import aotjax.special as special  # noqa: F401  (the public torch.special namespace)
    import aotjax.testing as testing  # noqa: F401  (torch.testing.assert_close)
    import aotjax.utils as utils  # noqa: F401  (torch.utils.data: datasets, samplers, DataLoader)
    from aotjax import lax  # noqa: F401,E402
    from aotjax.amp import autocast, cpu_amp  # noqa: F401
    from aotjax.autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled  # noqa: F401
    from aotjax.backends import (  # noqa: F401  (torch's process settings)
        are_deterministic_algorithms_enabled,
        get_float32_matmul_precision,
        get_num_interop_threads,
        get_num_threads,
        is_deterministic_algorithms_warn_only_enabled,
        set_float32_matmul_precision,
        set_num_interop_threads,
        set_num_threads,
        use_deterministic_algorithms,
    )
    from aotjax.checkpointing import load, save  # noqa: F401  (torch.save/torch.load; orbax imported on first use)
    from aotjax.core import ClosedJaxpr, Jaxpr, ShapedArray, eval_jaxpr, typecheck
    from aotjax.core.checks import config  # noqa: F401
    from aotjax.dtypes import *  # noqa: F401,F403
    from aotjax.lax import cond, fori_loop, scan, switch, while_loop  # noqa: F401,E402
    from aotjax.lowering import to_jax  # noqa: F401
    from aotjax.ops import *  # noqa: F401,F403
    from aotjax.ops.random import keys as random  # noqa: F401
    from aotjax.ops.unsupported import module_getattr as __getattr__  # noqa: F401  (clear errors for torch ops left out)
    from aotjax.tensor import Tensor, set_printoptions  # noqa: F401
    from aotjax.torch_compile import compile  # noqa: F401,E402  (torch.compile; a jaxpr: aotjax.lowering.compile)
    from aotjax.torchscript import attach as _attach_torchscript
    from aotjax.transforms import (  # noqa: F401
        aot,
        aot_function,
        aot_module,
        checkpoint,
        checkpoint_name,
        checkpoint_policies,
        custom_jvp,
        custom_vjp,
        deserialize,
        enable_grad,
        export,
        forward_backward,
        functionalize,
        grad,
        hessian,
        inference_mode,
        is_grad_enabled,
        jacfwd,
        jacrev,
        jit,
        jvp,
        linearize,
        make_jaxpr,
        no_grad,
        print_saved_residuals,
        remat,
        saved_residuals,
        set_grad_enabled,
        stop_gradient,
        value_and_grad,
        vjp,
        vmap,
        xla_compiler,
    )
    from aotjax.transforms.shard_map import shard_map  # noqa: F401,E402  (after `from aotjax.ops import *`: not the module)
    _attach_torchscript(jit)  # NOTE: torch.jit's TorchScript names (script, trace, is_scripting) on `jit`
    del _attach_torchscript
finally:
    if _collecting:
        _gc.enable()
    del _collecting, _gc, _jax

cpu = _SimpleNamespace(amp=cpu_amp)  # NOTE: `torch.cpu.amp.autocast` (bfloat16 by default)
del _SimpleNamespace, cpu_amp

__version__ = "0.1.0"
