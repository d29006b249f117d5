"""What runs in a DataLoader's worker process (`num_workers > 0`), and what crosses between the processes.

A worker is a fresh Python process (the `spawn` start method by default: JAX's runtime is multithreaded and does not
survive `fork`). It computes on the CPU, whatever device the main process uses, so that workers never claim an
accelerator, and in the main process's integer width (x64 or not). It receives its dataset, collate function and
`worker_init_fn` pickled, then tasks `(epoch, task index, sampler entry)`; it answers each with the batch, pickled, or
with `EXHAUSTED` (its copy of an iterable dataset has ended) or a `WorkerFailure` (the exception, to re-raise in the
main process). aotjax Tensors cross as NumPy arrays (`dumps`): what crosses is data, never a jax array.

Inside a worker `get_worker_info()` tells the dataset which worker it is (to split an iterable dataset's stream).
"""
from __future__ import annotations

import io
import multiprocessing
import pickle
import queue
import random
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import jax
import numpy as np

from aotjax.ops.base.data import tensor
from aotjax.ops.random.generator import manual_seed
from aotjax.tensor import Tensor
from aotjax.utils.data.fetch import Fetcher

__all__ = ["WorkerInfo", "get_worker_info"]


@dataclass(frozen=True)
class WorkerInfo:
    """Which worker runs: `id` (from 0), `num_workers`, its `seed` (the aotjax, Python and NumPy global generators
    are seeded with it) and its own copy of the `dataset`.

    >>> aotjax.utils.data.worker.WorkerInfo(id=0, num_workers=2, seed=7, dataset=None).num_workers
    2
    """

    id: int
    num_workers: int
    seed: int
    dataset: Any


_info: WorkerInfo | None = None  # NOTE: set once per worker process, before its dataset is iterated


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader's worker process, the `WorkerInfo` of that worker; None in the main process.

    >>> aotjax.utils.data.get_worker_info() is None
    True
    """
    return _info


# -- what crosses --------------------------------------------------------------------------------
class _TensorsAsNumpy(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return tensor, (np.asarray(obj),)
        return NotImplemented


def dumps(obj) -> bytes:
    """`obj` pickled, each aotjax Tensor as its value in a NumPy array (made a Tensor again where it is loaded)."""
    buf = io.BytesIO()
    _TensorsAsNumpy(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


class Exhausted:
    """A worker's answer when its copy of an iterable dataset has ended."""


EXHAUSTED = Exhausted()


class _Message(str):
    def __repr__(self) -> str:  # NOTE: a KeyError shows its argument's repr: keep the traceback readable
        return str(self)


@dataclass
class WorkerFailure:
    """An exception raised in a worker: its type and torch's message (which worker, the original traceback)."""

    exc_type: type
    message: str

    def reraise(self):
        try:
            exc = self.exc_type(_Message(self.message) if self.exc_type is KeyError else self.message)
        except Exception:  # NOTE: an exception type whose constructor wants more than a message
            exc = RuntimeError(self.message)
        raise exc


def _encode_failure(exc: BaseException, worker_id: int) -> bytes:
    text = "".join(traceback.format_exception(exc))
    message = (f"Caught {type(exc).__name__} in DataLoader worker process {worker_id}.\n"
               f"Original {text}").rstrip()
    try:
        return dumps(WorkerFailure(type(exc), message))
    except Exception:  # NOTE: an exception type defined where the main process cannot find it
        return dumps(WorkerFailure(RuntimeError, message))


# -- the worker ----------------------------------------------------------------------------------
@dataclass
class WorkerSpec:
    """What every worker of one DataLoader iterator gets (pickled once)."""

    dataset: Any
    iterable: bool
    auto_collation: bool
    collate_fn: Callable
    drop_last: bool
    worker_init_fn: Callable | None
    num_workers: int
    base_seed: int


def worker_loop(x64: bool, spec_bytes: bytes, worker_id: int, tasks, results) -> None:
    """A worker process's body: set up, then answer tasks until the main process sends None (or is gone)."""
    # NOTE: before anything makes an array (the spec holds tensors): the worker's arrays live on the CPU
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_enable_x64", x64)
    results.cancel_join_thread()  # NOTE: exit at once when told to; the main process wants no answer still queued
    spec, failure = _set_up(spec_bytes, worker_id)
    epoch, fetcher = None, None
    while (task := _next_task(tasks)) is not None:
        task_epoch, index, entry = pickle.loads(task)
        if task_epoch != epoch:  # NOTE: a new pass over the dataset (persistent workers): a fresh iterator
            epoch = task_epoch
            fetcher = None if failure else Fetcher(spec.dataset, spec.iterable, spec.auto_collation,
                                                   spec.collate_fn, spec.drop_last)
        results.put((task_epoch, index, failure or _answer(fetcher, entry, worker_id)))


def _set_up(spec_bytes: bytes, worker_id: int) -> tuple[WorkerSpec | None, bytes | None]:
    """The spec, seeds and `WorkerInfo` set, `worker_init_fn` run; or the failure every task is answered with."""
    global _info
    try:
        spec = pickle.loads(spec_bytes)
        seed = spec.base_seed + worker_id
        random.seed(seed)
        np.random.seed(seed)
        manual_seed(seed)
        _info = WorkerInfo(worker_id, spec.num_workers, seed, spec.dataset)
        if spec.worker_init_fn is not None:
            spec.worker_init_fn(worker_id)
        return spec, None
    except Exception as e:
        return None, _encode_failure(e, worker_id)


def _next_task(tasks) -> bytes | None:
    """The next task, or None when the main process says stop or has exited."""
    while True:
        try:
            return tasks.get(timeout=1.0)
        except queue.Empty:
            if not multiprocessing.parent_process().is_alive():
                return None


def _answer(fetcher: Fetcher, entry, worker_id: int) -> bytes:
    try:
        return dumps(fetcher.fetch(entry))
    except StopIteration:
        return dumps(EXHAUSTED)
    except Exception as e:
        return _encode_failure(e, worker_id)
