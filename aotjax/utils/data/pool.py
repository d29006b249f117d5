"""The main process's side of `num_workers > 0`: a pool of worker processes (`worker.py`) and the iterator over the
batches they load.

Tasks go to the workers round robin, `prefetch_factor` per worker ahead of what has been consumed; the batches come
back in the sampler's order, whichever worker finishes first. An iterable dataset's workers each run their own copy
of it: a worker whose copy has ended gets no more tasks, and the pass ends when every worker's has. Each task carries
the pass's number, so that with `persistent_workers` answers left from an abandoned pass are dropped.

A worker that raises passes its exception on (re-raised here, with the worker's traceback); one that dies, or a
`timeout` that passes without a batch, is a RuntimeError. The workers stop when the pass ends (or, with
`persistent_workers`, when the iterator is garbage collected), and at the latest when the main process exits.
"""
from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import multiprocessing.context
import pickle
import queue
import sys
import time
import weakref

import jax

from aotjax.core.source_info import where
from aotjax.utils.data.dataset import warn_length_overrun
from aotjax.utils.data.sampler import host_generator
from aotjax.utils.data.worker import Exhausted, WorkerFailure, WorkerSpec, dumps, worker_loop

__all__ = ["WorkerPoolIter", "base_seed", "default_context"]

_POLL_S = 1.0  # how often a wait for a batch checks that the workers are alive


class WorkerPoolIter:
    """The batches of one DataLoader, loaded by `loader.num_workers` worker processes (see the module's docstring).

    >>> WorkerPoolIter.__name__  # made by `iter(DataLoader(..., num_workers=2))`
    'WorkerPoolIter'
    """

    def __init__(self, loader):
        self._loader = loader
        n = loader.num_workers
        ctx = loader.multiprocessing_context or default_context()
        spec = WorkerSpec(loader.dataset, loader._iterable, loader._auto_collation, loader.collate_fn,
                          loader.drop_last, loader.worker_init_fn, n,
                          base_seed(loader.generator))
        spec_bytes = _pickled_spec(spec, n)
        self._results = ctx.Queue()
        self._tasks = [ctx.Queue() for _ in range(n)]
        self._workers = [ctx.Process(target=worker_loop, daemon=True,
                                     args=(bool(jax.config.jax_enable_x64), spec_bytes, i, self._tasks[i],
                                           self._results))
                         for i in range(n)]
        with _main_hidden_unless_named(spec_bytes):
            for w in self._workers:
                _start(w)
        self._stop = weakref.finalize(self, _shutdown, self._workers, self._tasks, self._results)
        self._epoch = -1
        self.reset()

    def reset(self) -> None:
        """Start a new pass over the dataset (the same workers, for `persistent_workers`)."""
        n = len(self._workers)
        self._epoch += 1
        self._entries = iter(self._loader._index_sampler)
        self._sent = self._received = 0
        self._reported, self._fetched = self._loader._IterableDataset_len_called, 0
        self._owner: dict[int, int] = {}  # task index -> the worker it went to, until its batch is consumed
        self._arrived: dict[int, bytes] = {}  # batches that came before their turn
        self._active = set(range(n))  # the workers whose copy of an iterable dataset has not ended
        self._turn = itertools.cycle(range(n))
        for _ in range(max(1, self._loader.prefetch_factor) * n):
            self._send()

    def __iter__(self):
        return self

    def __len__(self) -> int:
        return len(self._loader)

    def __next__(self):
        while self._received < self._sent and self._stop.alive:
            index = self._received
            result = pickle.loads(self._arrived.pop(index, None) or self._receive(index))
            worker = self._owner.pop(index)
            self._received += 1
            if isinstance(result, Exhausted):
                self._active.discard(worker)
            self._send()
            if isinstance(result, WorkerFailure):
                result.reraise()
            if not isinstance(result, Exhausted):
                if self._loader._iterable:
                    self._fetched += 1
                    warn_length_overrun(self._loader.dataset, self._reported, self._fetched, len(self._workers))
                return result
        if not self._loader.persistent_workers:
            self._stop()
        raise StopIteration

    def _send(self) -> None:
        if not self._active or not self._stop.alive:
            return
        entry = next(self._entries, _END)
        if entry is _END:
            return
        worker = next(w for w in self._turn if w in self._active)
        self._tasks[worker].put(dumps((self._epoch, self._sent, entry)))
        self._owner[self._sent] = worker
        self._sent += 1

    def _receive(self, index: int) -> bytes:
        """The answer to task `index`, keeping the answers to later tasks that come first."""
        while True:
            epoch, got, payload = self._get()
            if epoch != self._epoch:
                continue
            if got == index:
                return payload
            self._arrived[got] = payload

    def _get(self):
        timeout = self._loader.timeout
        deadline = time.monotonic() + timeout if timeout > 0 else None
        while True:
            wait = _POLL_S if deadline is None else max(0.0, min(_POLL_S, deadline - time.monotonic()))
            try:
                return self._results.get(timeout=wait)
            except queue.Empty:
                dead = [str(w.pid) for w in self._workers if not w.is_alive()]
                if dead:
                    self._stop()
                    raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(dead)}) exited unexpectedly") from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise RuntimeError(f"DataLoader timed out after {timeout} seconds") from None


_END = object()


def base_seed(generator) -> int:
    """The seed a pass's workers are seeded from (worker `i`: `base_seed + i`): one draw of the DataLoader's
    generator (default: the global one), made at the start of every pass, with workers or without, as torch does, so
    that a shuffled order is the same for every `num_workers`.

    >>> base_seed(aotjax.Generator().manual_seed(0)) == base_seed(aotjax.Generator().manual_seed(0))
    True
    """
    return int(host_generator("DataLoader", generator).integers(2 ** 30))


def default_context() -> multiprocessing.context.BaseContext:
    """Where workers start when the DataLoader names no `multiprocessing_context`: 'forkserver' where the platform
    has it, else 'spawn'; never 'fork', which JAX's threads do not survive.

    The fork server is asked to import aotjax before it forks (unless it runs already): a worker then starts in a
    fraction of a second instead of importing aotjax anew, as one started by 'spawn' does. Importing aotjax starts
    no thread and no device runtime, so the fork is safe; the user's `__main__` is imported in each worker, as with
    'spawn', not in the server, where code at its top level could start JAX's runtime before the fork.

    >>> default_context().get_start_method() in ("forkserver", "spawn")
    True
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["aotjax"])
    return ctx


@contextlib.contextmanager
def _main_hidden_unless_named(spec_bytes: bytes):
    """Workers start without running the user's script again, unless what they receive refers to it.

    NOTE: 'spawn' and 'forkserver' import `__main__` in each worker (as `__mp_main__`, from its `__file__` or its
    `__spec__`), and a script without an `if __name__ == "__main__":` guard does not survive that: its top level
    starts the training again (PyTorch's workers, forked on Linux, never run it). The script is needed only where
    the pickled dataset, collate_fn or worker_init_fn names something defined in it, so otherwise its `__file__`
    and `__spec__` are hidden from multiprocessing while the workers start."""
    main = sys.modules.get("__main__")
    hidden = {name: getattr(main, name) for name in ("__file__", "__spec__") if getattr(main, name, None) is not None}
    if not hidden or b"__main__" in spec_bytes:
        yield
        return
    for name in hidden:
        setattr(main, name, None) if name == "__spec__" else delattr(main, name)
    try:
        yield
    finally:
        for name, value in hidden.items():
            setattr(main, name, value)


def _start(worker) -> None:
    try:
        worker.start()
    except (BrokenPipeError, EOFError, ConnectionError) as e:
        raise RuntimeError(f"DataLoader worker (pid {worker.pid}) exited while starting{where()}: a worker imports "
                           f"the script that defines the dataset, collate_fn or worker_init_fn, and a script that "
                           f"starts a DataLoader at its top level starts it again there. Put the script's top-level "
                           f"code under `if __name__ == '__main__':`, define the dataset in a module of its own, or "
                           f"pass num_workers=0") from e


def _pickled_spec(spec: WorkerSpec, n: int) -> bytes:
    try:
        return dumps(spec)
    except Exception as e:
        raise TypeError(f"DataLoader: num_workers={n} sends the dataset, collate_fn and worker_init_fn to worker "
                        f"processes by pickle, and one of them cannot be pickled ({type(e).__name__}: {e})"
                        f"{where()}; define them at a module's top level (not as lambdas or local functions), "
                        f"or pass num_workers=0") from e


def _shutdown(workers, tasks, results) -> None:
    """Tell each worker to stop, wait a moment, end those that do not; close the queues."""
    for q in tasks:
        try:
            q.put(None)
        except (ValueError, OSError):  # NOTE: closed already
            pass
    for w in workers:
        w.join(timeout=5.0)
        if w.is_alive():
            w.terminate()
            w.join()
    for q in (*tasks, results):
        q.cancel_join_thread()
        q.close()
