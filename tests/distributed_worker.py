"""One process of tests/test_distributed.py (run as a script; jax's device count and its distributed runtime are fixed
per process). `pair I PORT OUT`: process I of two on a localhost coordinator (both save a checkpoint beside OUT);
`single OUT`: one process (with 8 devices), the reference runs. Each trains examples/multiprocess_train.py's model
3 steps, checks the bad input it is given, writes its losses and parameters to OUT (.npz) and prints "ok"."""
from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import sys
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", os.environ.get("AOTJAX_TEST_X64", "0") == "1")  # the suite's mode

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import Mesh  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import aotjax  # noqa: E402
from aotjax.core.errors import ShapeError  # noqa: E402

dist = aotjax.distributed
STEPS = 3


def _example():
    path = Path(__file__).parents[1] / "examples" / "multiprocess_train.py"
    spec = importlib.util.spec_from_file_location("multiprocess_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _raises(error: type, *words: str):
    """The block raises `error` with each of `words` in its message."""
    with pytest.raises(error) as e:
        yield
    for w in words:
        assert w in str(e.value), f"{w!r} not in: {e.value}"


def pair(me: int, port: int, checkpoint: str) -> dict:
    dist.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=me, timeout=60)
    with _raises(RuntimeError, "initialize: this process is already connected", "distributed_worker.py"):
        dist.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=me)
    assert (dist.process_count(), dist.process_index(), len(jax.devices())) == (2, me, 8)
    assert dist.get_world_size() == 2 and dist.get_rank() == me and dist.is_initialized()
    mesh = Mesh(np.array(jax.devices()), ("data",))
    losses, params = _example().train(mesh, STEPS)   # NOTE: its programs are compared across the processes

    local = np.arange(8.0, dtype=np.float32).reshape(4, 2) + 100 * me
    g = dist.global_tensor(local, mesh, P("data"))
    assert g.shape == (8, 2) and not g.sharding.is_fully_addressable
    np.testing.assert_array_equal(dist.local_tensor(g).numpy(), local)
    np.testing.assert_array_equal(dist.local_tensor(aotjax.jit(lambda t: t * 2)(g)).numpy(), 2 * local)
    with _raises(ShapeError, "local data of shape (3, 2)", "multiple of 4", "(4, 2)"):
        dist.global_tensor(np.ones((3, 2), np.float32), mesh, P("data"))
    # a checkpoint of a global tensor: each process writes its shards (the test loads it in one process)
    aotjax.save({"g": g, "step": STEPS, "lr": [0.1, None]}, checkpoint)
    if me == 0:  # a program over local tensors only: one process compiles it alone, unchecked
        assert float(aotjax.jit(lambda t: t.sum())(aotjax.ones(3))) == 3.0

    def differs(t):  # NOTE: the realistic bug: a trace that reads the process index
        return t * 2 if dist.process_index() == 0 else t + 1
    with _raises(dist.ProgramMismatchError, "jit: differs traces to a different program", f"in process {me} than",
                 "first differ at line", "process 0: ", "mul", "process 1: ", "add"):
        aotjax.jit(differs)(g)
    dist.barrier("end")
    return {"losses": losses, **params}


def single() -> dict:
    with socket_port() as port:  # NOTE: bound and not listening: nothing answers there
        with _raises(ConnectionError, f"coordinator at 127.0.0.1:{port} could not be reached within 1 s",
                     "check that process 0 runs"):
            dist.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=1, timeout=1)
    assert not dist.is_initialized() and dist.process_count() == 1
    train = _example().train
    eight, eight_params = train(Mesh(np.array(jax.devices()), ("data",)), STEPS)
    one, one_params = train(Mesh(np.array(jax.devices()[:1]), ("data",)), STEPS)
    return {"losses": eight, **eight_params, **{f"one.{k}": v for k, v in one_params.items()}, "one.losses": one}


@contextlib.contextmanager
def socket_port():
    """A port of 127.0.0.1 held (bound, not listening) inside the block."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


if __name__ == "__main__":
    if sys.argv[1] == "pair":
        out, results = sys.argv[4], pair(int(sys.argv[2]), int(sys.argv[3]), str(Path(sys.argv[4]).parent / "ckpt"))
    else:
        out, results = sys.argv[2], single()
    np.savez(out, **results)
    dist.shutdown()
    print("ok")
