"""`torch.nn.parallel` as single-process scripts use it: `DataParallel` and `data_parallel` run the wrapped module on
the device jax computes on, as torch's do when there is no GPU (one replica, the whole batch: the same math as the
module alone, BatchNorm statistics included). To spread a batch over several devices, shard it
(`aotjax.device_put(x, sharding)`; README "Many devices"): the compiled program is partitioned by XLA.
`DistributedDataParallel` needs torch's process groups, which aotjax does not have: it raises and says so.

>>> net = aotjax.nn.DataParallel(aotjax.nn.Linear(2, 3))
>>> net(aotjax.ones(4, 2)).shape, list(net.state_dict())
((4, 3), ['module.weight', 'module.bias'])
"""
from __future__ import annotations

from aotjax.core.source_info import where
from aotjax.nn.module import Module

__all__ = ["DataParallel", "data_parallel", "DistributedDataParallel"]


class DataParallel(Module):
    """Wraps `module` as `self.module` (so `state_dict` keys start with `module.`, as torch's) and calls it on the
    whole input. `device_ids`, `output_device` and `dim` are accepted and kept: jax places the arrays."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: expected an aotjax.nn.Module to wrap, got {type(module).__name__}"
                            f"{where()}")
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device, self.dim = output_device, dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module: Module, inputs, device_ids=None, output_device=None, dim: int = 0, module_kwargs=None):
    """`torch.nn.parallel.data_parallel`: `module(*inputs, **module_kwargs)` on jax's device (see the module
    docstring).

    >>> aotjax.nn.parallel.data_parallel(aotjax.nn.Identity(), aotjax.ones(2)).shape
    (2,)
    """
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return module(*inputs, **(module_kwargs or {}))


class DistributedDataParallel(Module):
    """Raises: torch's DDP synchronises gradients between processes of a process group, which aotjax does not
    have. One process drives every device in jax: shard the batch instead (README "Many devices")."""

    def __init__(self, module: Module, *args, **kwargs):
        super().__init__()
        raise RuntimeError(f"DistributedDataParallel: aotjax has no torch.distributed process group to synchronise "
                           f"gradients over{where()}; one aotjax process drives all of jax's devices, so train the "
                           f"module itself and shard the batch over the devices (aotjax.device_put(x, sharding)) to "
                           f"run data parallel")
