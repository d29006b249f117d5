"""`aotjax.distributed`: two processes on a localhost coordinator (4 simulated CPU devices each) train as one process
with 8 devices and as one device; bad input (a second `initialize`, an unreachable coordinator, a local shape that
does not fit, processes that trace different programs) raises a clear error instead of hanging. The processes run
tests/distributed_worker.py, started at once; the checks inside them are listed there."""
from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import aotjax
from aotjax.core.errors import ShapeError, UnsupportedError
from tests.helpers import X64

dist = aotjax.distributed
ROOT = Path(__file__).parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], devices: int, hash_seed: int) -> subprocess.Popen:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONHASHSEED=str(hash_seed), AOTJAX_TEST_X64="1" if X64 else "0",
               XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}")
    return subprocess.Popen([sys.executable, str(ROOT / "tests" / "distributed_worker.py"), *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_two_processes_train_as_one_process_and_refuse_bad_input(tmp_path):
    port = _free_port()
    # NOTE: different hash seeds, as separately started processes have: tracing must not depend on them
    procs = [_start(["pair", str(i), str(port), str(tmp_path / f"pair{i}.npz")], 4, hash_seed=i + 1) for i in range(2)]
    procs.append(_start(["single", str(tmp_path / "single.npz")], 8, hash_seed=7))
    try:
        outputs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, out in zip(procs, outputs, strict=True):
        assert p.returncode == 0 and out.rstrip().endswith("ok"), out[-4000:]
    pair0, pair1, single = (np.load(tmp_path / f"{n}.npz") for n in ("pair0", "pair1", "single"))
    assert sorted(pair0.files) == sorted(pair1.files) and len(pair0["losses"]) == 3
    tol = {"rtol": 1e-5, "atol": 1e-6}
    for name in pair0.files:
        np.testing.assert_array_equal(pair0[name], pair1[name], err_msg=name)  # replicated: the same everywhere
        np.testing.assert_allclose(pair0[name], single[name], **tol, err_msg=name)  # 1 process, 8 devices
        np.testing.assert_allclose(pair0[name], single[f"one.{name}"], **tol, err_msg=name)  # 1 device
    # the processes' shards of a global tensor, saved by both, load whole in this process (on its devices)
    saved = aotjax.load(tmp_path / "ckpt")
    assert saved["step"] == 3 and saved["lr"] == [0.1, None]
    expected = np.concatenate([np.arange(8.0).reshape(4, 2) + 100 * i for i in range(2)])
    np.testing.assert_array_equal(saved["g"].numpy(), expected)


def test_one_process_global_and_local_tensors_are_the_data():
    mesh = Mesh(np.array(jax.devices()), ("data",))
    g = dist.global_tensor(aotjax.arange(6.0).reshape(3, 2), mesh, P("data"))
    assert g.shape == (3, 2) and g.sharding.spec == P("data")
    np.testing.assert_array_equal(dist.local_tensor(g).numpy(), np.arange(6.0).reshape(3, 2))
    with pytest.raises(ShapeError, match=r"global_tensor: the PartitionSpec .* names 2 dimensions, but the local "
                                         r"data has shape \(3,\)"):
        dist.global_tensor(np.ones(3, np.float32), mesh, P("data", None))


def test_one_process_needs_no_initialize_and_refuses_a_late_one():
    assert (dist.process_count(), dist.process_index(), dist.is_initialized(), dist.is_available()) == (1, 0, False,
                                                                                                          True)
    dist.barrier("alone")  # nothing to wait for
    with pytest.raises(RuntimeError, match="initialize: jax has already started its devices in this process "
                                           r"\(at .*test_distributed.py"):
        dist.initialize("127.0.0.1:1234", num_processes=2, process_id=1)
    with pytest.raises(ValueError, match="get_rank: the default process group has not been initialized"):
        dist.get_rank()


def test_init_process_group_reads_torchruns_environment(monkeypatch):
    calls = []
    monkeypatch.setattr(dist.runtime, "initialize", lambda *a, **k: calls.append((a, k)))
    for name, value in {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "RANK": "3", "WORLD_SIZE": "4",
                        "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    dist.init_process_group("gloo")
    dist.init_process_group(init_method="tcp://127.0.0.1:1234", world_size=2, rank=0,
                            timeout=datetime.timedelta(seconds=5))
    assert calls == [(("10.0.0.1:29500", 4, 3, [1]), {"timeout": 300.0}),
                     (("127.0.0.1:1234", 2, 0, [1]), {"timeout": 5.0})]
    monkeypatch.delenv("MASTER_PORT")
    with pytest.raises(ValueError, match="init_process_group: init_method 'env://' reads MASTER_PORT"):
        dist.init_process_group()
    with pytest.raises(UnsupportedError, match="init_process_group: a store is not supported"):
        dist.init_process_group(store=object())
