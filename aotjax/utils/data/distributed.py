"""`DistributedSampler`: each of `num_replicas` processes reads its own share of a dataset, as torch's.

Where torch asks its default process group for `num_replicas` and `rank`, aotjax asks JAX: `jax.process_count()` and
`jax.process_index()` (one process, the usual case on one host: the whole dataset). Pass them to shard otherwise.
"""
from __future__ import annotations

import math
from typing import Iterator, Sized

import jax

from aotjax.ops.random.generator import Generator
from aotjax.utils.data.sampler import Sampler, host_generator

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler[int]):
    """Replica `rank`'s indices: every `num_replicas`-th index from `rank` on, of a permutation seeded by
    `seed + epoch` (`set_epoch(e)` before each epoch gives a new one, the same on every replica) or of
    `range(len(dataset))` with `shuffle=False`. The indices are padded by repeating the first ones so that each
    replica gets `ceil(len / num_replicas)`, or, with `drop_last`, cut so that each gets `floor(...)`.

    >>> list(aotjax.utils.data.DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False))
    [1, 3, 0]
    >>> s = aotjax.utils.data.DistributedSampler(range(5), num_replicas=2, rank=0)
    >>> s.set_epoch(1); len(s)
    3
    """

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        num_replicas = jax.process_count() if num_replicas is None else num_replicas
        rank = jax.process_index() if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            indices = host_generator("DistributedSampler", Generator(self.seed + self.epoch)).permutation(n).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            padding = self.total_size - n
            indices += (indices * math.ceil(padding / n))[:padding] if padding > 0 else []
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next pass shuffles for: replicas that set the same epoch share one permutation."""
        self.epoch = epoch
