"""`aotjax.autograd`: PyTorch's imperative autograd (`backward()`, `.grad`, `autograd.grad`, `autograd.Function`)
on the one set of derivative rules the transforms use.

- `graph`: which eager tensors require grad and the nodes their values come from (the recording, below the
  interpreters: eager evaluation records);
- `engine`: the backward of a recording, as one program differentiated by the transforms;
- `tensor_methods`: `Tensor`'s autograd attributes (`requires_grad`, `grad`, `backward()`, hooks) and
  `backward` / `grad`;
- `function`: `autograd.Function` on `custom_vjp`; `functional`: `jacobian`, `hessian`, `vjp`, ... on the
  transforms.

The package imports nothing above the recording when loaded (eager evaluation imports `graph`); `aotjax` loads the
rest.
"""
__all__ = ["backward", "grad", "Function", "FunctionCtx", "once_differentiable", "functional", "no_grad",
           "enable_grad", "inference_mode", "set_grad_enabled", "detect_anomaly", "set_detect_anomaly"]


def __getattr__(name: str):
    # NOTE: lazy: eager evaluation imports `aotjax.autograd.graph`, which loads this package first
    if name in ("backward", "grad"):
        from aotjax.autograd import tensor_methods  # NOTE: lazy, as above
        return getattr(tensor_methods, name)
    if name in ("Function", "FunctionCtx", "once_differentiable"):
        from aotjax.autograd import function  # NOTE: lazy, as above
        return getattr(function, name)
    if name in ("no_grad", "enable_grad", "inference_mode", "set_grad_enabled"):
        from aotjax.transforms import grad_mode  # NOTE: lazy, as above
        return getattr(grad_mode, name)
    if name in ("detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled"):
        from aotjax.autograd import anomaly_mode  # NOTE: lazy, as above
        return getattr(anomaly_mode, name)
    if name == "functional":
        import importlib  # NOTE: lazy, as above
        return importlib.import_module("aotjax.autograd.functional")
    raise AttributeError(f"module 'aotjax.autograd' has no attribute {name!r}")
