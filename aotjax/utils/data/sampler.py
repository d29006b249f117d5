"""Samplers, as `torch.utils.data`'s: iterables of dataset indices (`SequentialSampler`, `RandomSampler`,
`SubsetRandomSampler`, `WeightedRandomSampler`) and of lists of indices (`BatchSampler`).

Random samplers draw from an `aotjax.Generator` when given one, else from the global generator, so
`aotjax.manual_seed(s)` makes their order reproducible. Each pass (`iter(sampler)`) draws anew: a DataLoader's
epochs come in different orders. A pass draws one key from the aotjax generator and shuffles on the host with a NumPy
generator seeded by it (`host_generator`): the indices are wanted as Python ints, and the draw has one shape whatever
the dataset's length, where `aotjax.randperm(n)` is an XLA program compiled anew for each `n` (about a second each).
"""
from __future__ import annotations

from typing import Generic, Iterator, Sequence, Sized, TypeVar

import numpy as np

from aotjax.core.avals import canonicalize_dtype
from aotjax.core.source_info import where
from aotjax.ops.base.data import tensor
from aotjax.ops.random.generator import Generator, draw_key

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler", "host_generator"]

T_co = TypeVar("T_co", covariant=True)


def check_generator(op: str, generator) -> None:
    """`generator` must be None or an `aotjax.Generator` (a `torch.Generator` cannot drive aotjax's draws)."""
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"{op}: generator must be an aotjax.Generator or None, got {type(generator).__name__}"
                        f"{where()}; pass aotjax.Generator().manual_seed(seed)")


def host_generator(op: str, generator: Generator | None) -> np.random.Generator:
    """A NumPy generator seeded by one draw of `generator` (default: the global aotjax generator), which it advances:
    the same aotjax seed gives the same NumPy stream.

    >>> a = host_generator("doc", aotjax.Generator().manual_seed(0)).permutation(5)
    >>> b = host_generator("doc", aotjax.Generator().manual_seed(0)).permutation(5)
    >>> bool((a == b).all()), sorted(a.tolist())
    (True, [0, 1, 2, 3, 4])
    """
    return np.random.default_rng(np.asarray(draw_key(op, generator)).astype(np.uint32))


def _check_positive_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value}")


class Sampler(Generic[T_co]):
    """The base class: subclasses define `__iter__` (indices, or lists of them for a batch sampler) and may define
    `__len__`.

    >>> class Evens(aotjax.utils.data.Sampler):
    ...     def __iter__(self):
    ...         return iter([0, 2, 4])
    >>> list(Evens())
    [0, 2, 4]
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """`0, 1, ..., len(data_source) - 1`.

    >>> list(aotjax.utils.data.SequentialSampler("abc"))
    [0, 1, 2]
    """

    def __init__(self, data_source: Sized):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """Indices in random order: a permutation of `range(len(data_source))` (several, one after another, when
    `num_samples` exceeds the length), or with `replacement=True` `num_samples` independent draws.

    >>> g = aotjax.Generator().manual_seed(0)
    >>> sorted(aotjax.utils.data.RandomSampler(range(4), generator=g))
    [0, 1, 2, 3]
    >>> len(aotjax.utils.data.RandomSampler(range(4), replacement=True, num_samples=10))
    10
    """

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None,
                 generator: Generator | None = None):
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        check_generator("RandomSampler", generator)
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples
        _check_positive_int("num_samples", self.num_samples)

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n, k = len(self.data_source), self.num_samples
        rng = host_generator("RandomSampler", self.generator)
        if self.replacement:
            yield from rng.integers(0, n, k).tolist()
            return
        for _ in range(k // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n)[:k % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given `indices`, in random order (a new order at each pass).

    >>> sorted(aotjax.utils.data.SubsetRandomSampler([5, 7, 9]))
    [5, 7, 9]
    """

    def __init__(self, indices: Sequence[int], generator: Generator | None = None):
        check_generator("SubsetRandomSampler", generator)
        self.indices, self.generator = indices, generator

    def __iter__(self) -> Iterator[int]:
        for i in host_generator("SubsetRandomSampler", self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """`num_samples` indices of `range(len(weights))`, each drawn with probability proportional to its weight, as
    `multinomial` draws them: with `replacement=False` no index comes twice (and those of weight 0 come last).

    >>> s = aotjax.utils.data.WeightedRandomSampler([0.0, 1.0, 0.0], 4)
    >>> list(s)
    [1, 1, 1, 1]
    """

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Generator | None = None):
        _check_positive_int("num_samples", num_samples)
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        check_generator("WeightedRandomSampler", generator)
        # NOTE: float64 as torch's, when x64 is on; the 32-bit mode's float otherwise (without a truncation warning)
        self.weights = tensor(weights, dtype=canonicalize_dtype("float64"))
        if self.weights.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(self.weights.shape)}")
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator

    def __iter__(self) -> Iterator[int]:
        w = _checked_weights(np.asarray(self.weights, np.float64), self.num_samples, self.replacement)
        rng = host_generator("WeightedRandomSampler", self.generator)
        if self.replacement:
            return iter(rng.choice(len(w), self.num_samples, p=w / w.sum()).tolist())
        with np.errstate(divide="ignore"):  # NOTE: weighted order without replacement: Exp(1) / w ascending
            keys = rng.exponential(size=len(w)) / w
        return iter(np.argsort(keys, kind="stable")[:self.num_samples].tolist())

    def __len__(self) -> int:
        return self.num_samples


def _checked_weights(w: np.ndarray, num_samples: int, replacement: bool) -> np.ndarray:
    """The weights, after torch's checks of a multinomial distribution (RuntimeErrors, with its messages)."""
    if not replacement and num_samples > len(w):
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if not (w >= 0).all():
        raise RuntimeError("invalid multinomial distribution (encountering probability entry < 0)")
    if w.sum() <= 0:
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    return w


class BatchSampler(Sampler[list]):
    """Lists of `batch_size` consecutive indices of `sampler`; the last one shorter, or dropped with `drop_last`.

    >>> list(aotjax.utils.data.BatchSampler(range(5), 2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    >>> len(aotjax.utils.data.BatchSampler(range(5), 2, drop_last=True))
    2
    """

    def __init__(self, sampler: Sampler[int] | Sequence[int], batch_size: int, drop_last: bool):
        _check_positive_int("batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list]:
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
