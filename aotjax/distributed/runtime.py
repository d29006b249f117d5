"""Many processes on JAX's multi-controller runtime: start it, ask who we are, wait for each other.

One process per host (or per accelerator), each running the same script: `initialize` connects them through
JAX's coordinator (`jax.distributed.initialize`), after which `jax.devices()` are the devices of all of them and a
`Mesh` over those is a global mesh. This module is the one place aotjax reads JAX's private distributed state (its
client: the key-value store and barriers the processes share), so that a change there touches one file.
"""
from __future__ import annotations

import datetime
import itertools
import math
import socket
import time

import jax

from aotjax.core.source_info import where

__all__ = ["initialize", "shutdown", "is_initialized", "process_index", "process_count", "barrier", "client"]

_barriers = itertools.count()  # NOTE: each process calls `barrier` in the same order: the n-th ones meet


def _state():
    from jax._src import distributed  # NOTE: private: the client and the process id live only there

    return distributed.global_state


def client():
    """JAX's distributed runtime client (key-value store, barriers), or None when `initialize` has not run."""
    return _state().client


def _backends_started() -> bool:
    from jax._src import xla_bridge  # NOTE: private: jax says so only by raising from its `initialize`

    return xla_bridge.backends_are_initialized()


def is_initialized() -> bool:
    """Whether this process is connected to the others (`initialize` ran, `shutdown` did not since).

    >>> aotjax.distributed.is_initialized()
    False
    """
    return client() is not None


def process_index() -> int:
    """This process's index among `process_count()` (0 when there is only one): `jax.process_index()`.

    >>> aotjax.distributed.process_index()
    0
    """
    return jax.process_index()


def process_count() -> int:
    """How many processes run the program (1 unless `initialize` connected several): `jax.process_count()`.

    >>> aotjax.distributed.process_count()
    1
    """
    return jax.process_count()


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids=None, *, timeout: float = 300.0) -> None:
    """Connect this process to the others, before anything runs on a device: `jax.distributed.initialize`.

    `coordinator_address` (`"host:port"`) is where process 0 serves the coordinator; each of the `num_processes`
    processes calls this with its own `process_id`. Left out, they are found as JAX finds them (the
    `JAX_COORDINATOR_ADDRESS` environment variable, SLURM, Open MPI, TPU pods). On CPUs the devices of different
    processes talk through JAX's gloo collectives, turned on here. A coordinator that cannot be reached within
    `timeout` seconds raises a `ConnectionError` saying what to check; so does, from JAX, a process that waits
    longer than that for the others to connect (JAX then ends the process).

    >>> aotjax.distributed.initialize("127.0.0.1:1234", num_processes=2, process_id=0)  # doctest: +SKIP
    >>> len(jax.devices()), len(jax.local_devices())                                  # doctest: +SKIP
    (8, 4)
    """
    if is_initialized():
        raise RuntimeError(f"initialize: this process is already connected (as process {_state().process_id} of "
                           f"{_state().num_processes}, to {_state().coordinator_address}){where()}; call it once "
                           f"per process, or `aotjax.distributed.shutdown()` first to connect again")
    if _backends_started():
        raise RuntimeError(f"initialize: jax has already started its devices in this process{where()}; call "
                           f"`aotjax.distributed.initialize` first, before any tensor is made or any jax call runs")
    address = coordinator_address
    if address is not None and process_id is not None:
        _check_reachable(address, process_id, timeout)
    previous = jax.config.jax_cpu_collectives_implementation
    if previous in (None, "none"):  # NOTE: without it a CPU program over devices of two processes cannot run
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(coordinator_address, num_processes, process_id, local_device_ids,
                                   initialization_timeout=max(1, math.ceil(timeout)))
    except BaseException:
        jax.config.update("jax_cpu_collectives_implementation", previous)
        raise


def _check_reachable(address: str, process_id: int, timeout: float) -> None:
    """Raise a `ConnectionError` unless `address` can be served (process 0: it is an address of this machine)
    or reached (the others: something listens there) within `timeout` seconds.
    NOTE: jax ends the process (a fatal log, no exception) when its client cannot connect: checked here first."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise ValueError(f"initialize: coordinator_address must be 'host:port', got {address!r}{where()}")
    if process_id == 0:
        try:
            with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
                s.bind((host, 0))
        except OSError as e:
            raise ConnectionError(f"initialize: process 0 serves the coordinator at {address}, but {host} is not an "
                                  f"address of this machine ({e}){where()}; start process 0 on {host}, or give "
                                  f"the address of the machine process 0 runs on") from None
        return
    deadline, error = time.monotonic() + timeout, None
    while True:  # NOTE: process 0 may start after this one: try until the deadline
        try:
            with socket.create_connection((host, int(port)), timeout=max(0.05, deadline - time.monotonic())):
                return
        except OSError as e:
            error = e
        if time.monotonic() >= deadline:
            raise ConnectionError(f"initialize: the coordinator at {address} could not be reached within {timeout:g} s "
                                  f"({error}){where()}; check that process 0 runs and was given the same address, "
                                  f"that the host and port are right, and that no firewall is in the way (or give "
                                  f"a longer timeout)")
        time.sleep(0.1)


def shutdown() -> None:
    """Disconnect this process from the others (`jax.distributed.shutdown`); nothing when not connected."""
    if is_initialized():
        jax.distributed.shutdown()


def barrier(name: str | None = None, timeout: float | datetime.timedelta | None = None, *, group=None,
            async_op: bool = False, device_ids=None) -> None:
    """Wait until every process has reached this barrier (its `name`, if given, must be the same in all); nothing
    when there is one process. Processes meet at their n-th barrier: call it in the same order everywhere.
    `timeout`: seconds (or a `timedelta`, as torch's `barrier` takes; default 300). `group`, `async_op` and
    `device_ids` are torch's, accepted for scripts that pass them (there is one group; the wait is synchronous).

    >>> aotjax.distributed.barrier("after-load")
    """
    c = client()
    n = next(_barriers)
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    timeout = 300.0 if timeout is None else float(timeout)
    if c is None or _state().num_processes <= 1:
        return
    try:
        c.wait_at_barrier(f"aotjax/barrier/{n}/{name or ''}", max(1, int(timeout * 1000)))
    except Exception as e:  # NOTE: jax's XlaRuntimeError: a deadline, or another process gone
        raise TimeoutError(f"barrier: the processes did not all reach barrier {name or n!r} within {timeout:g} s "
                           f"({e}){where()}; a process that stopped, or one that calls barriers in another order, "
                           f"leaves the others waiting") from None
