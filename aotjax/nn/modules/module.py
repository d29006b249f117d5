"""`torch.nn.modules.module`'s names: `Module` and the hooks of every module (`register_module_forward_hook`, ...),
defined in `aotjax.nn.module`.

>>> aotjax.nn.modules.module.Module is aotjax.nn.Module
True
"""
from aotjax.nn.module import (  # noqa: F401
    Module,
    RemovableHandle,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)

__all__ = ["Module", "RemovableHandle", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_pre_hook", "register_module_full_backward_hook"]
