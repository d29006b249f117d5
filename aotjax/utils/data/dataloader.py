"""`DataLoader`: batches of a dataset, as `torch.utils.data.DataLoader`, with torch's arguments, their checks and
their error messages.

It puts together an index sampler and a collate function: a map-style dataset is read at the indices of `sampler`
(`SequentialSampler`, or `RandomSampler` with `shuffle=True`), grouped by `batch_sampler` (a `BatchSampler` of
`batch_size`, `drop_last`) and each group collated (`default_collate`); an iterable dataset is read in order,
`batch_size` samples at a time. `batch_size=None` turns batching off: each sample is converted (`default_convert`).

Shuffling draws from `generator` (an `aotjax.Generator`) or else from the global generator: `aotjax.manual_seed(s)`
makes the order reproducible, and each epoch (each `iter(loader)`) has its own.

`num_workers > 0` loads in worker processes (`pool.py`, `worker.py`), started with `multiprocessing_context`
(by default 'forkserver', with aotjax imported once by the server, or 'spawn' where there is no fork server; never
'fork': JAX does not survive it). The dataset, `collate_fn` and `worker_init_fn` are pickled to them (define them at
a module's top level), each worker imports the script's `__main__` module (put the script's work under
`if __name__ == "__main__":`), and a worker computes on the CPU. Starting workers takes a fraction of a second (the
first time, as long as `import aotjax`): `persistent_workers=True` starts them once for all epochs. `pin_memory` is
accepted and does nothing (XLA moves the data when a program uses it).
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import warnings
from typing import Any, Callable, Generic, Iterator, TypeVar

from aotjax.ops.random.generator import Generator
from aotjax.utils.data.collate import default_collate, default_convert
from aotjax.utils.data.dataset import Dataset, IterableDataset, warn_length_overrun
from aotjax.utils.data.fetch import Fetcher
from aotjax.utils.data.pool import WorkerPoolIter, base_seed
from aotjax.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, check_generator

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)

_FIXED_AFTER_INIT = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


class _InfiniteConstantSampler(Sampler[None]):
    """The entries of an iterable dataset's sampler: placeholders, as many as wanted."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


class DataLoader(Generic[T_co]):
    """Iterates over batches of `dataset` (see the module's docstring for the arguments).

    >>> ds = aotjax.utils.data.TensorDataset(aotjax.arange(5.0), aotjax.arange(5))
    >>> loader = aotjax.utils.data.DataLoader(ds, batch_size=2)
    >>> len(loader), next(iter(loader))
    (3, [tensor([0., 1.]), tensor([0, 1])])
    >>> [len(x) for x, y in aotjax.utils.data.DataLoader(ds, batch_size=2, drop_last=True)]
    [2, 2]
    """

    def __init__(self, dataset: Dataset[T_co], batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | None = None, batch_sampler: Sampler | None = None, num_workers: int = 0,
                 collate_fn: Callable[[list], Any] | None = None, pin_memory: bool = False, drop_last: bool = False,
                 timeout: float = 0, worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context=None, generator: Generator | None = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False, pin_memory_device: str = ""):
        _check_workers(num_workers, timeout, prefetch_factor, persistent_workers)
        check_generator("DataLoader", generator)
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            _check_iterable(shuffle, sampler, batch_sampler)
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            sampler = (_InfiniteConstantSampler() if self._iterable else
                       RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.timeout, self.worker_init_fn = num_workers, timeout, worker_init_fn
        self.prefetch_factor = 2 if prefetch_factor is None and num_workers > 0 else prefetch_factor
        self.pin_memory, self.pin_memory_device = pin_memory, pin_memory_device
        self.persistent_workers = persistent_workers
        self.collate_fn = collate_fn or (default_collate if self._auto_collation else default_convert)
        self.multiprocessing_context = multiprocessing_context
        self._pool: WorkerPoolIter | None = None
        self._IterableDataset_len_called: int | None = None  # NOTE: torch's name: what `len(self)` last said
        self._initialized = True
        self.check_worker_number_rationality()

    def __setattr__(self, name: str, value) -> None:
        if name in _FIXED_AFTER_INIT and getattr(self, "_initialized", False):
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(name, value)

    @property
    def multiprocessing_context(self):
        """The `multiprocessing` context worker processes start in (None: `pool.default_context()`)."""
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context) -> None:
        if context is not None:
            if self.num_workers <= 0:
                raise ValueError(f"multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={self.num_workers}")
            if isinstance(context, str):
                methods = multiprocessing.get_all_start_methods()
                if context not in methods:
                    raise ValueError(f"multiprocessing_context option should specify a valid start method in "
                                     f"{methods!r}, but got multiprocessing_context={context!r}")
                context = multiprocessing.get_context(context)
            if not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError(f"multiprocessing_context option should be a valid context object or a string "
                                f"specifying the start method, but got multiprocessing_context={context}")
        self._multiprocessing_context = context

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        """What each step reads: a batch's indices (batching) or one index."""
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if not self.persistent_workers:
            return WorkerPoolIter(self)
        if self._pool is None:
            self._pool = WorkerPoolIter(self)
        else:
            self._pool.reset()
        return self._pool

    def __len__(self) -> int:
        if not self._iterable:
            return len(self._index_sampler)
        n = self._IterableDataset_len_called = len(self.dataset)
        # NOTE: an iterator yielding more batches than the dataset's length warns (`warn_length_overrun`): torch
        # compares batches with the dataset's `len`, not with the batch count it returns here
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def check_worker_number_rationality(self) -> None:
        """Warn, as torch, when `num_workers` is more than the CPUs this process may run on: the workers then slow
        loading down (or freeze it) rather than speed it up."""
        if self.num_workers <= 0:
            return
        try:
            cpus, counted = len(os.sched_getaffinity(0)), True
        except AttributeError:  # NOTE: no affinity on this platform: every CPU counts
            cpus, counted = os.cpu_count(), False
        if cpus is not None and self.num_workers <= cpus:
            return
        suggestion = ("DataLoader is not able to compute a suggested max number of worker in current system."
                      if cpus is None else
                      f"Our suggested max number of worker in current system is {cpus}"
                      f"{'' if counted else ' (`cpuset` is not taken into account)'}, which is smaller than what "
                      f"this DataLoader is going to create.")
        warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in total. {suggestion} "
                      f"Please be aware that excessive worker creation might get DataLoader running slow or even "
                      f"freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
                      stacklevel=3)


class _SingleProcessIter:
    """The batches of a DataLoader with `num_workers=0`, loaded in the calling process."""

    def __init__(self, loader: DataLoader):
        self._loader = loader
        self._reported, self._fetched = loader._IterableDataset_len_called, 0
        base_seed(loader.generator)  # NOTE: drawn and unused, as a worker pool draws it: one order for any num_workers
        self._entries = iter(loader._index_sampler)
        self._fetcher = Fetcher(loader.dataset, loader._iterable, loader._auto_collation, loader.collate_fn,
                                loader.drop_last)

    def __iter__(self):
        return self

    def __next__(self):
        batch = self._fetcher.fetch(next(self._entries))
        if self._loader._iterable:
            self._fetched += 1
            warn_length_overrun(self._loader.dataset, self._reported, self._fetched, 0)
        return batch

    def __len__(self) -> int:
        return len(self._loader)


def _check_workers(num_workers: int, timeout: float, prefetch_factor: int | None, persistent_workers: bool) -> None:
    if num_workers < 0:
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 to "
                         "enable multiprocessing, otherwise set prefetch_factor to None.")
    if prefetch_factor is not None and prefetch_factor < 0:
        raise ValueError("prefetch_factor option should be non-negative")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")


def _check_iterable(shuffle, sampler, batch_sampler) -> None:
    """An iterable dataset has its own order: no shuffle, sampler or batch sampler."""
    given = [("shuffle", shuffle)] if shuffle not in {False, None} else []
    given += [(name, v) for name, v in (("sampler", sampler), ("batch_sampler", batch_sampler)) if v is not None]
    for name, value in given[:1]:
        raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} option, but got "
                         f"{name}={value}")
