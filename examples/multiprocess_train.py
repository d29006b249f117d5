"""Data-parallel training over many processes, on JAX's multi-controller runtime, written as PyTorch code.

Each process runs this same script (as on a cluster, one process per host): it connects to the others
(`aotjax.distributed.initialize`), builds the same model, and feeds its share of each batch as a global tensor
(`aotjax.distributed.global_tensor`) sharded over the devices of all processes; the parameters start on each
process and are replicated by the compiled step, whose gradient all-reduce XLA inserts. The step is PyTorch's
`loss.backward(); opt.step(); opt.zero_grad()`, compiled whole by `aotjax.jit` and traced once. The processes share
a persistent compilation cache (`AOTJAX_COMPILATION_CACHE`), so a program is compiled once for all of them.

Here the processes run on this machine, on a localhost coordinator, each with 4 simulated CPU devices:

    python examples/multiprocess_train.py --processes 2        # 2 processes x 4 devices
    python examples/multiprocess_train.py --processes 1        # the same on one process with 8 devices

Porting a torchrun script: `import aotjax as torch`, then `torch.distributed.init_process_group()` reads the
`MASTER_ADDR`, `MASTER_PORT`, `RANK` and `WORLD_SIZE` torchrun sets; there is no `DistributedDataParallel` to wrap
the model in: a batch sharded over the mesh is what makes the step data parallel.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

import aotjax as torch  # noqa: I001  (the PyTorch-style surface, under torch's name)
import aotjax.nn as nn
import aotjax.nn.functional as F

DEVICES = 8  # in all processes together
BATCH, FEATURES, CLASSES = 32, 8, 4


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(FEATURES, 32)
        self.out = nn.Linear(32, CLASSES)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def batch(step: int) -> tuple[np.ndarray, np.ndarray]:
    """The whole global batch of `step` (every process makes the same, and feeds its share)."""
    rng = np.random.default_rng(step)
    x = rng.normal(size=(BATCH, FEATURES)).astype(np.float32)
    return x, (x[:, :CLASSES].argmax(1) + (x[:, -1] > 1)) % CLASSES


def train(mesh, steps: int) -> tuple[list[float], dict[str, np.ndarray]]:
    """`steps` AdamW steps on batches sharded over `mesh`'s `data` axis; the losses and the final parameters."""
    import jax
    from jax.sharding import PartitionSpec as P

    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)

    @torch.jit
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    rows = BATCH // jax.process_count()  # this process's share of each batch
    me = jax.process_index()
    losses = []
    for k in range(steps):
        x, y = (a[me * rows:(me + 1) * rows] for a in batch(k))
        loss = step(torch.distributed.global_tensor(x, mesh, P("data")),
                    torch.distributed.global_tensor(y, mesh, P("data")))
        losses.append(float(loss))
    assert step.trace_count == 1, step.trace_count
    return losses, {name: torch.distributed.local_tensor(p).numpy() for name, p in model.named_parameters()}


def worker(process_id: int, processes: int, port: int, steps: int) -> None:
    """One process: connect (with more than one), train on the global mesh, process 0 prints the loss curve."""
    import jax
    from jax.sharding import Mesh

    if processes > 1:
        torch.distributed.initialize(f"127.0.0.1:{port}", num_processes=processes, process_id=process_id, timeout=60)
    mesh = Mesh(np.array(jax.devices()), ("data",))
    start = time.perf_counter()
    losses, _ = train(mesh, steps)
    if process_id == 0:
        print(f"{processes} process{'es' if processes > 1 else ''} x {len(jax.local_devices())} devices, "
              f"{time.perf_counter() - start:.1f} s")
        for k, loss in enumerate(losses):
            print(f"step {k:3d}  loss {loss:.4f}  " + "#" * int(40 * loss / losses[0]))
    torch.distributed.shutdown()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(processes: int, steps: int) -> int:
    """Start `processes` copies of this script on a localhost coordinator, sharing a compilation cache."""
    if DEVICES % processes:
        raise SystemExit(f"--processes must divide {DEVICES}")
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES // processes}")
    env.setdefault("AOTJAX_COMPILATION_CACHE", os.path.join(tempfile.gettempdir(), "aotjax-multiprocess-cache"))
    port = free_port()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(i), "--processes", str(processes),
                               "--port", str(port), "--steps", str(steps)], env=env) for i in range(processes)]
    try:
        return max(p.wait(timeout=600) for p in procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is None:
        sys.exit(launch(args.processes, args.steps))
    worker(args.worker, args.processes, args.port, args.steps)


if __name__ == "__main__":
    main()
