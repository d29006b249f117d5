"""PyTorch's names (`torch.distributed`) over `aotjax.distributed`, so a DDP-style script launched by `torchrun` ports:
`init_process_group` reads torchrun's environment (`MASTER_ADDR`, `MASTER_PORT`, `RANK`, `WORLD_SIZE`,
`LOCAL_RANK`), a rank is a process index (`barrier` and `is_initialized` are `aotjax.distributed`'s own, which
take torch's arguments too). There are no process groups beyond the default one, and no collectives
here: a program over a global mesh gets its collectives from XLA (`jit` with sharded inputs, or `shard_map`)."""
from __future__ import annotations

import datetime
import os

from aotjax.core.errors import UnsupportedError
from aotjax.core.source_info import where
from aotjax.distributed import runtime

__all__ = ["init_process_group", "destroy_process_group", "get_rank", "get_world_size", "is_available"]


def is_available() -> bool:
    """True: processes can be connected (`torch.distributed.is_available`)."""
    return True


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: datetime.timedelta | None = None, world_size: int = -1, rank: int = -1,
                       store=None, group_name: str = "", pg_options=None, device_id=None) -> None:
    """Connect this process to the others, as `torch.distributed.init_process_group` (`aotjax.distributed.initialize`).

    `init_method` is `"env://"` (the default: `MASTER_ADDR` and `MASTER_PORT` from the environment, as torchrun sets
    them) or `"tcp://host:port"`; `world_size` and `rank` default to `WORLD_SIZE` and `RANK`. Where torchrun starts
    several processes per machine (`LOCAL_WORLD_SIZE` > 1), each gets the accelerator `LOCAL_RANK`. `backend`
    (`"gloo"`, `"nccl"`, ...) is accepted and left to JAX, which picks the collectives for its devices.

    >>> aotjax.distributed.init_process_group("gloo", init_method="tcp://127.0.0.1:29500",
    ...                                       world_size=2, rank=0)  # doctest: +SKIP
    """
    if store is not None:
        raise UnsupportedError(f"init_process_group: a store is not supported{where()}; the processes meet at JAX's "
                               f"coordinator: give init_method='tcp://host:port' or set MASTER_ADDR and MASTER_PORT")
    address = _address(init_method)
    world_size = world_size if world_size != -1 else _env_int("WORLD_SIZE")
    rank = rank if rank != -1 else _env_int("RANK")
    local = [_env_int("LOCAL_RANK")] if int(os.environ.get("LOCAL_WORLD_SIZE", "1")) > 1 else None
    seconds = timeout.total_seconds() if timeout is not None else 300.0
    runtime.initialize(address, world_size, rank, local, timeout=seconds)


def _address(init_method: str | None) -> str:
    if init_method is None or init_method == "env://":
        missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
        if missing:
            raise ValueError(f"init_process_group: init_method 'env://' reads {' and '.join(missing)} from the "
                             f"environment, which is not set{where()}; start the processes with torchrun, set "
                             f"them, or give init_method='tcp://host:port'")
        return f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    if init_method.startswith("tcp://"):
        return init_method.removeprefix("tcp://")
    raise UnsupportedError(f"init_process_group: init_method {init_method!r} is not supported{where()}; give "
                           f"'env://' (MASTER_ADDR and MASTER_PORT) or 'tcp://host:port'")


def _env_int(name: str) -> int:
    if name not in os.environ:
        raise ValueError(f"init_process_group: {name} is not given and not set in the environment{where()}; pass it "
                         f"(world_size=, rank=) or start the processes with torchrun, which sets it")
    return int(os.environ[name])


def _connected(op: str) -> None:
    if not runtime.is_initialized():
        raise ValueError(f"{op}: the default process group has not been initialized{where()}; call "
                         f"init_process_group first (or aotjax.distributed.initialize)")


def get_rank(group=None) -> int:
    """This process's rank (`aotjax.distributed.process_index()`); raises, as torch does, before
    `init_process_group`."""
    _connected("get_rank")
    return runtime.process_index()


def get_world_size(group=None) -> int:
    """How many processes there are (`aotjax.distributed.process_count()`); raises, as torch does, before
    `init_process_group`."""
    _connected("get_world_size")
    return runtime.process_count()


def destroy_process_group(group=None) -> None:
    """Disconnect from the others (`aotjax.distributed.shutdown`)."""
    runtime.shutdown()
