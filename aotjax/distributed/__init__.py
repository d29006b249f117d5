"""`aotjax.distributed`: many processes (one per host, or per accelerator) running one program over the devices of
all of them, on JAX's multi-controller runtime; no launcher and no collectives of aotjax's own.

    aotjax.distributed.initialize("10.0.0.1:1234", num_processes=2, process_id=i)   # before any tensor is made
    mesh = Mesh(np.array(jax.devices()), ("data",))                               # all processes' devices
    x = aotjax.distributed.global_tensor(my_share_of_the_batch, mesh, P("data"))
    loss = step(x)                                                                # a jit'ted step, as on one host

The same with PyTorch's names (`init_process_group`, `get_rank`, `get_world_size`, `barrier`,
`destroy_process_group`), reading torchrun's environment. With several processes, each program `jit` or `aot`
compiles over global tensors is compared across the processes before it runs (`program_check`): processes that
traced different programs raise `ProgramMismatchError` instead of waiting on each other forever.
"""
from aotjax.distributed.process_group import (  # noqa: F401
    destroy_process_group,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
)
from aotjax.distributed.program_check import ProgramMismatchError  # noqa: F401
from aotjax.distributed.runtime import (  # noqa: F401
    barrier,
    initialize,
    is_initialized,
    process_count,
    process_index,
    shutdown,
)
from aotjax.distributed.tensors import global_tensor, local_tensor  # noqa: F401
