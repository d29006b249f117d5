"""Datasets, as `torch.utils.data`'s: the map-style `Dataset` (`__getitem__` and `__len__`) and the `IterableDataset`
(`__iter__`), and the ones built from others: `TensorDataset`, `StackDataset`, `ConcatDataset`, `ChainDataset`,
`Subset`, and `random_split`.

A dataset may define `__getitems__(indices)`, a list of samples for a list of indices; the DataLoader then fetches a
batch in one call (`TensorDataset` gathers the batch's rows at once; `Subset`, `ConcatDataset` and `StackDataset`
pass it on to the datasets they wrap).
"""
from __future__ import annotations

import bisect
import itertools
import math
import warnings
from typing import Generic, Iterable, Sequence, TypeVar

import numpy as np

from aotjax.tensor import Tensor
from aotjax.utils.data.sampler import check_generator, host_generator

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split"]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map-style dataset: subclasses define `__getitem__(index)` (and usually `__len__`). `a + b` concatenates.

    >>> class Squares(aotjax.utils.data.Dataset):
    ...     def __getitem__(self, i):
    ...         return i * i
    ...     def __len__(self):
    ...         return 4
    >>> ds = Squares() + Squares()
    >>> len(ds), ds[5]
    (8, 1)
    """

    def __getitem__(self, index) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


def warn_length_overrun(dataset, reported: int | None, fetched: int, workers: int) -> None:
    """torch's warning when a DataLoader over an IterableDataset yields more batches than `len(loader)` said
    (`reported`, None when `len` was not asked): the dataset's `__len__` is wrong, or each worker yields all of it."""
    if reported is None or fetched <= reported:
        return
    message = (f"Length of IterableDataset {dataset} was reported to be {reported} (when accessing len(dataloader)), "
               f"but {fetched} samples have been fetched. ")
    if workers > 0:
        message += ("For multiprocessing data-loading, this could be caused by not properly configuring the "
                    "IterableDataset replica at each worker (split the stream by get_worker_info()).")
    warnings.warn(message, stacklevel=3)


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """A dataset that is a stream: subclasses define `__iter__`. `a + b` chains. With `num_workers > 0` each worker
    iterates its own copy: split the stream with `get_worker_info()` inside `__iter__`, or each sample comes once
    per worker.

    >>> class Count(aotjax.utils.data.IterableDataset):
    ...     def __init__(self, n):
    ...         self.n = n
    ...     def __iter__(self):
    ...         return iter(range(self.n))
    >>> list(Count(2) + Count(3))
    [0, 1, 0, 1, 2]
    """

    def __add__(self, other: Dataset) -> ChainDataset:
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple]):
    """Samples are the tensors' rows: `ds[i]` is `tuple(t[i] for t in tensors)`; every tensor has the same size
    in its first dimension. A DataLoader reads a batch's rows at once (`__getitems__`: one gather per tensor).

    >>> ds = aotjax.utils.data.TensorDataset(aotjax.arange(6).reshape(3, 2), aotjax.tensor([7, 8, 9]))
    >>> len(ds), ds[1]
    (3, (tensor([2, 3]), tensor(8)))
    """

    def __init__(self, *tensors: Tensor):
        assert all(tensors[0].size(0) == t.size(0) for t in tensors), "Size mismatch between tensors"
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __getitems__(self, indices: list) -> list[tuple]:
        if not all(isinstance(i, (int, np.integer)) for i in indices):
            return [self[i] for i in indices]
        # NOTE: the rows are views of one gathered batch, not of the tensors: eagerly, reading a view compiles a
        # program for its index, so rows read one by one would compile anew for each new index (every shuffled
        # batch), where these compile once per batch size. (A write into a row does not reach the dataset.)
        columns = [t[list(indices)].unbind(0) for t in self.tensors]
        return list(zip(*columns))

    def __len__(self) -> int:
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Datasets of one length side by side: `StackDataset(a, b)[i]` is `(a[i], b[i])`, `StackDataset(x=a, y=b)[i]`
    is `{"x": a[i], "y": b[i]}`.

    >>> ds = aotjax.utils.data.StackDataset(x=[1, 2], y=["a", "b"])
    >>> ds[1]
    {'x': 2, 'y': 'b'}
    """

    def __init__(self, *args: Dataset, **kwargs: Dataset):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                             "input/output, but both types are given.")
        datasets = list(args or kwargs.values())
        if not datasets:
            raise ValueError("At least one dataset should be passed")
        self._length = len(datasets[0])
        if any(len(d) != self._length for d in datasets):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args or kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        named = isinstance(self.datasets, dict)
        columns = {k: _fetch_many(d, indices) for k, d in (self.datasets.items() if named else
                                                            enumerate(self.datasets))}
        rows = [dict(zip(columns, row)) for row in zip(*columns.values())]
        return rows if named else [tuple(r.values()) for r in rows]

    def __len__(self) -> int:
        return self._length


def _fetch_many(dataset, indices: list) -> list:
    """`[dataset[i] for i in indices]`, through the dataset's `__getitems__` when it has one."""
    many = getattr(dataset, "__getitems__", None)
    return list(many(indices)) if many else [dataset[i] for i in indices]


class ConcatDataset(Dataset):
    """Map-style datasets one after another: index `len(a) + i` is `b[i]`; negative indices count from the end.

    >>> ds = aotjax.utils.data.ConcatDataset([[1, 2, 3], [4, 5]])
    >>> len(ds), ds[3], ds[-1], ds.cumulative_sizes
    (5, 4, 5, [3, 5])
    """

    def __init__(self, datasets: Iterable[Dataset]):
        self.datasets = list(datasets)
        assert len(self.datasets) > 0, "datasets should not be an empty iterable"
        for d in self.datasets:
            assert not isinstance(d, IterableDataset), "ConcatDataset does not support IterableDataset"
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int):
        which, local = self._locate(idx)
        return self.datasets[which][local]

    def __getitems__(self, indices: list) -> list:
        located = [self._locate(i) for i in indices]
        out = [None] * len(indices)
        for which in sorted({w for w, _ in located}):  # NOTE: each dataset's share in one call (its __getitems__)
            places = [p for p, (w, _) in enumerate(located) if w == which]
            for p, sample in zip(places, _fetch_many(self.datasets[which], [located[p][1] for p in places])):
                out[p] = sample
        return out

    def _locate(self, idx: int) -> tuple[int, int]:
        """(which dataset, index in it) of index `idx`."""
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        return which, idx - (self.cumulative_sizes[which - 1] if which else 0)


class ChainDataset(IterableDataset):
    """Iterable datasets one after another, chained lazily as they are iterated.

    >>> list(aotjax.utils.data.ChainDataset([]))
    []
    """

    def __init__(self, datasets: Iterable[Dataset]):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            assert isinstance(d, IterableDataset), "ChainDataset only supports IterableDataset"
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            assert isinstance(d, IterableDataset), "ChainDataset only supports IterableDataset"
            total += len(d)
        return total


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order: `Subset(ds, idx)[i]` is `ds[idx[i]]`.

    >>> sub = aotjax.utils.data.Subset([10, 11, 12, 13], [3, 0])
    >>> len(sub), sub[0], sub.__getitems__([0, 1])
    (2, 13, [13, 10])
    """

    def __init__(self, dataset: Dataset, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list) -> list:
        return _fetch_many(self.dataset, [self.indices[i] for i in indices])

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset: Dataset, lengths: Sequence[int | float], generator=None) -> list[Subset]:
    """Split `dataset` at random into `Subset`s of the given lengths, or of the given fractions of its length
    (summing to 1; the samples left by rounding down go one each to the first splits). The permutation is drawn
    from `generator` (an `aotjax.Generator`; default: the global one, seeded by `aotjax.manual_seed`), as a
    sampler's (`sampler.host_generator`).

    >>> parts = aotjax.utils.data.random_split(range(10), [0.5, 0.3, 0.2], generator=aotjax.Generator().manual_seed(0))
    >>> [len(p) for p in parts], sorted(i for p in parts for i in p)
    ([5, 3, 2], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    """
    check_generator("random_split", generator)
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _lengths_of_fractions(n, lengths)
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = host_generator("random_split", generator).permutation(n).tolist()
    ends = itertools.accumulate(lengths)
    return [Subset(dataset, order[end - length:end]) for end, length in zip(ends, lengths)]


def _lengths_of_fractions(n: int, fractions: Sequence[float]) -> list[int]:
    for i, frac in enumerate(fractions):
        if not 0 <= frac <= 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1")
    lengths = [math.floor(n * frac) for frac in fractions]
    for i in range(n - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.", stacklevel=3)
    return lengths
