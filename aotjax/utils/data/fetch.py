"""One batch from a dataset, for one entry of the DataLoader's index sampler (a list of indices when it batches, one
index when it does not): the same in the main process and in a worker.

A map-style dataset is indexed (through `__getitems__` when it has one); an iterable dataset is advanced, by as many
samples as the entry holds (its entries are placeholders). `fetch` raises `StopIteration` when an iterable dataset
is exhausted: an empty batch, or a short one with `drop_last`, is no batch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

__all__ = ["Fetcher"]


@dataclass
class Fetcher:
    """Fetches batches of `dataset` for one pass over it (a new Fetcher per pass: an iterable dataset is iterated
    afresh).

    >>> f = Fetcher(range(5), iterable=True, auto_collation=True, collate_fn=list, drop_last=False)
    >>> f.fetch([None, None]), f.fetch([None, None]), f.fetch([None, None])
    ([0, 1], [2, 3], [4])
    """

    dataset: Any
    iterable: bool
    auto_collation: bool
    collate_fn: Callable
    drop_last: bool
    _stream: Iterator | None = field(default=None, repr=False)
    _ended: bool = field(default=False, repr=False)

    def fetch(self, entry):
        return self.collate_fn(self._from_stream(entry) if self.iterable else self._from_map(entry))

    def _from_map(self, entry):
        if not self.auto_collation:
            return self.dataset[entry]
        many = getattr(self.dataset, "__getitems__", None)
        return many(entry) if many else [self.dataset[i] for i in entry]

    def _from_stream(self, entry):
        if self._stream is None:
            self._stream = iter(self.dataset)
        if self._ended:
            raise StopIteration
        if not self.auto_collation:
            return next(self._stream)
        samples = []
        for _ in entry:
            try:
                samples.append(next(self._stream))
            except StopIteration:
                self._ended = True
                break
        if not samples or (self.drop_last and len(samples) < len(entry)):
            raise StopIteration
        return samples
