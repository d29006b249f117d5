"""`aotjax.utils.data` against `torch.utils.data`: sequential loaders give torch's batches (values, dtypes mapped to
the mode's, structure) over the same datasets; shuffled ones give torch's multisets, reproducibly under
`aotjax.manual_seed` or a `generator=`, and a new order each epoch; samplers, `random_split` and the composed
datasets as torch's; every argument error with torch's class and message; worker processes; a training loop."""
from __future__ import annotations

import collections
import functools
import multiprocessing
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import aotjax
from aotjax.core.avals import canonicalize_dtype
from aotjax.core.errors import ShapeError
from aotjax.utils import data as D

if multiprocessing.parent_process() is None:  # NOTE: a DataLoader worker imports this module for its datasets only
    import torch
    from torch.utils import data as T

pytestmark = pytest.mark.filterwarnings("ignore::aotjax.core.errors.DTypeTruncationWarning")  # int64 NumPy data


# -- comparing batches -------------------------------------------------------------------------------
def assert_same(ours, theirs, where="batch"):
    """Same structure (container types, keys, lengths), same leaves; tensors of torch's values and of its dtype as
    the mode has it (int64 -> int32 and float64 -> float32 without x64)."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, aotjax.Tensor), f"{where}: {type(ours).__name__}, expected a Tensor"
        assert ours.dtype == canonicalize_dtype(str(theirs.dtype).removeprefix("torch.")), where
        assert tuple(ours.shape) == tuple(theirs.shape), where
        np.testing.assert_allclose(np.asarray(ours), theirs.numpy(), rtol=1e-6, err_msg=where)
        return
    assert type(ours) is type(theirs), f"{where}: {type(ours).__name__}, expected {type(theirs).__name__}"
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs), where
        for k in theirs:
            assert_same(ours[k], theirs[k], f"{where}[{k!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), where
        for i, (o, t) in enumerate(zip(ours, theirs)):
            assert_same(o, t, f"{where}[{i}]")
    else:
        assert ours == theirs, where


# -- datasets both libraries read: plain Python classes of NumPy arrays, numbers and strings ------------------------
Point = collections.namedtuple("Point", "x y")

SAMPLES = {
    "dict": lambda i: {"x": np.arange(3, dtype=np.float32) + i, "label": i % 3, "name": f"s{i}", "w": 0.5 * i},
    "tuple": lambda i: (np.array([i, -i]), bool(i % 2)),
    "namedtuple": lambda i: Point(np.float64(i) / 4, [i, i + 1]),
    "nested": lambda i: [{"a": (i, np.int32(i))}, np.full((2, 2), i, np.uint8), collections.OrderedDict(b=[b"x"])],
    "scalar": lambda i: i,
}


class Samples:
    def __init__(self, kind: str, n: int = 10):
        self.kind, self.n = kind, n

    def __getitem__(self, i):
        return SAMPLES[self.kind](i)

    def __len__(self):
        return self.n


SEQUENTIAL = [
    ("dict", dict(batch_size=4)),
    ("tuple", dict(batch_size=3, drop_last=True)),
    ("tuple", dict(batch_size=4, shuffle=False)),
    ("namedtuple", dict(batch_size=4)),
    ("nested", dict(batch_size=5)),
    ("scalar", dict(batch_size=None)),
    ("dict", dict(batch_size=None)),
    ("tuple", dict(batch_sampler=[[0, 1, 2], [5], [7, 8]])),
    ("scalar", dict(sampler=[3, 1, 2], batch_size=2)),
    ("dict", dict(batch_size=3, collate_fn=lambda b: [s["label"] for s in b])),
    ("namedtuple", dict(batch_size=1, pin_memory=True)),
]


@pytest.mark.parametrize("kind, kwargs", SEQUENTIAL, ids=[f"{k}-{'-'.join(kw)}" for k, kw in SEQUENTIAL])
def test_sequential_loader_gives_torchs_batches(kind, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NOTE: torch warns about pin_memory without an accelerator; aotjax must not
        theirs = list(T.DataLoader(Samples(kind), **kwargs))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=aotjax.core.errors.DTypeTruncationWarning)
        ours = D.DataLoader(Samples(kind), **kwargs)
        got = list(ours)
    assert len(ours) == len(T.DataLoader(Samples(kind), **kwargs)) == len(theirs)
    assert len(got) == len(theirs)
    for i, (o, t) in enumerate(zip(got, theirs)):
        assert_same(o, t, f"batch {i}")


def test_tensor_dataset_and_composed_datasets():
    x, y = np.arange(16.0, dtype=np.float32).reshape(8, 2), np.arange(8) % 2
    ours, theirs = D.TensorDataset(aotjax.tensor(x), aotjax.tensor(y)), T.TensorDataset(torch.tensor(x),
                                                                                          torch.tensor(y))
    assert_same(ours[2], theirs[2])
    assert_same(ours.__getitems__([5, 1]), [theirs[5], theirs[1]])
    # NOTE: one batch size throughout: each new one compiles its gather and stack
    for make in (lambda M, d: d, lambda M, d: M.ConcatDataset([d, d]), lambda M, d: M.Subset(d, [7, 0, 3, 1]),
                 lambda M, d: M.StackDataset(d, d), lambda M, d: M.StackDataset(a=d, b=d), lambda M, d: d + d):
        assert_same(list(D.DataLoader(make(D, ours), batch_size=4)), list(T.DataLoader(make(T, theirs), batch_size=4)))


class SquareList:
    def __getitem__(self, i):
        return [k * k for k in i] if isinstance(i, list) else i * i

    def __len__(self):
        return 10


def test_concat_subset_stack_indexing():
    ds = [range(3), range(4), range(2)]
    ours, theirs = D.ConcatDataset(ds), T.ConcatDataset(ds)
    assert len(ours) == len(theirs) and ours.cumulative_sizes == theirs.cumulative_sizes
    assert [ours[i] for i in range(-9, 9)] == [theirs[i] for i in range(-9, 9)]
    assert D.Subset(SquareList(), [1, 5])[[0, 1]] == T.Subset(SquareList(), [1, 5])[[0, 1]] == [1, 25]
    assert D.Subset(range(10), [1, 5]).__getitems__([1, 0]) == T.Subset(range(10), [1, 5]).__getitems__([1, 0])
    for args, kwargs in ([(range(3), "abc"), {}], [(), {"a": range(3), "b": "abc"}]):
        o, t = D.StackDataset(*args, **kwargs), T.StackDataset(*args, **kwargs)
        assert len(o) == len(t) and o[2] == t[2] and o.__getitems__([0, 2]) == t.__getitems__([0, 2])


# -- iterable datasets ---------------------------------------------------------------------------------
def counting(M, n: int, with_len: bool = True):
    attrs = {"__iter__": lambda self: iter(range(n))}
    if with_len:
        attrs["__len__"] = lambda self: n
    return type("Count", (M.IterableDataset,), attrs)()


@pytest.mark.parametrize("kwargs", [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None),
                                    dict(batch_size=7), dict(batch_size=2, shuffle=False)])
def test_iterable_dataset_loader(kwargs):
    ours, theirs = D.DataLoader(counting(D, 7), **kwargs), T.DataLoader(counting(T, 7), **kwargs)
    assert len(ours) == len(theirs)
    for _ in range(2):  # NOTE: each epoch iterates the dataset anew
        assert_same(list(ours), list(theirs))


def test_chain_dataset_and_addition():
    assert list(D.ChainDataset([counting(D, 2), counting(D, 3)])) == list(T.ChainDataset([counting(T, 2),
                                                                                          counting(T, 3)]))
    assert len(counting(D, 2) + counting(D, 3)) == 5
    assert isinstance(counting(D, 2) + counting(D, 3), D.ChainDataset)
    square = type("Square", (D.Dataset,), {"__getitem__": lambda self, i: i * i, "__len__": lambda self: 3})()
    assert isinstance(square + square, D.ConcatDataset) and (square + square)[4] == 1


# -- randomness ----------------------------------------------------------------------------------------
def epoch_indices(loader_) -> list[int]:
    return [i for batch in loader_ for i in batch.tolist()]


def test_shuffled_loader_is_torchs_multiset_reproducible_and_new_each_epoch():
    ds = list(range(20))
    theirs = sorted(epoch_indices(T.DataLoader(ds, batch_size=6, shuffle=True)))
    aotjax.manual_seed(0)
    ours = D.DataLoader(ds, batch_size=6, shuffle=True)
    first, second = epoch_indices(ours), epoch_indices(ours)
    assert sorted(first) == sorted(second) == theirs
    assert first != second  # NOTE: 1 in 20! to fail by chance
    aotjax.manual_seed(0)
    assert epoch_indices(ours) == first and epoch_indices(ours) == second
    assert [len(b) for b in ours] == [len(b) for b in T.DataLoader(ds, batch_size=6, shuffle=True)] == [6, 6, 6, 2]


def test_generator_drives_the_order_and_leaves_the_global_one():
    ds = list(range(20))
    state = aotjax.get_rng_state()
    a = epoch_indices(D.DataLoader(ds, batch_size=5, shuffle=True, generator=aotjax.Generator().manual_seed(3)))
    b = epoch_indices(D.DataLoader(ds, batch_size=5, shuffle=True, generator=aotjax.Generator().manual_seed(3)))
    c = epoch_indices(D.DataLoader(ds, batch_size=5, shuffle=True, generator=aotjax.Generator().manual_seed(4)))
    assert a == b != c and sorted(c) == ds
    assert aotjax.get_rng_state().tolist() == state.tolist()
    with pytest.raises(TypeError, match="DataLoader: generator must be an aotjax.Generator"):
        D.DataLoader(ds, shuffle=True, generator=torch.Generator())


def test_random_samplers_against_torch():
    ds = range(10)
    for kwargs in (dict(), dict(num_samples=25), dict(num_samples=4), dict(replacement=True, num_samples=30)):
        o, t = list(D.RandomSampler(ds, **kwargs)), list(T.RandomSampler(ds, **kwargs))
        assert len(o) == len(t) == len(D.RandomSampler(ds, **kwargs)) and set(o) <= set(ds)
        if not kwargs.get("replacement"):  # NOTE: how often each index comes is fixed without replacement
            assert sorted(collections.Counter(o).values()) == sorted(collections.Counter(t).values())
    g = aotjax.Generator()
    first = list(D.RandomSampler(ds, generator=g.manual_seed(1)))
    assert list(D.RandomSampler(ds, generator=g.manual_seed(1))) == first
    assert sorted(D.SubsetRandomSampler([5, 7, 9, 11])) == sorted(T.SubsetRandomSampler([5, 7, 9, 11]))
    assert len(D.SubsetRandomSampler([5, 7])) == 2
    w = [0.0, 1.0, 0.0, 2.0]
    assert sorted(D.WeightedRandomSampler(w, 2, replacement=False)) == sorted(T.WeightedRandomSampler(w, 2, False))
    assert set(D.WeightedRandomSampler(w, 50)) == {1, 3} and len(D.WeightedRandomSampler(w, 50)) == 50
    assert D.WeightedRandomSampler(w, 2).weights.dtype == canonicalize_dtype("float64")


def test_weighted_sampler_follows_the_weights():
    aotjax.manual_seed(0)
    counts = collections.Counter(D.WeightedRandomSampler([1.0, 3.0], 4000))
    assert abs(counts[1] / 4000 - 0.75) < 0.03


def test_sequential_and_batch_samplers_against_torch():
    for n, bs, drop in [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, False)]:
        o, t = D.BatchSampler(D.SequentialSampler(range(n)), bs, drop), T.BatchSampler(range(n), bs, drop)
        assert list(o) == list(t) and len(o) == len(t)
    assert list(D.SequentialSampler("abc")) == list(T.SequentialSampler("abc")) == [0, 1, 2]


@pytest.mark.parametrize("n, replicas, drop_last", [(10, 3, False), (10, 3, True), (5, 2, False), (2, 4, False),
                                                    (8, 4, True), (7, 2, True)])
def test_distributed_sampler_against_torch(n, replicas, drop_last):
    for rank in range(replicas):
        o = D.DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        t = T.DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        assert list(o) == list(t) and len(o) == len(t) and o.total_size == t.total_size
    shuffled = [D.DistributedSampler(range(n), replicas, r, drop_last=drop_last) for r in range(replicas)]
    theirs = [T.DistributedSampler(range(n), replicas, r, drop_last=drop_last) for r in range(replicas)]
    union = sorted(i for s in shuffled for i in s)  # NOTE: which indices repeat (or are dropped) is random
    assert len(union) == len([i for s in theirs for i in s]) and set(union) <= set(range(n))
    if not drop_last:
        assert set(union) == set(range(n))
    else:
        assert len(set(union)) == len(union)
    first = [list(s) for s in shuffled]
    assert first == [list(s) for s in shuffled]  # NOTE: seed + epoch: the same order until set_epoch
    for s in shuffled:
        s.set_epoch(1)
    assert sorted(set(i for s in shuffled for i in s)) == sorted(set(union)) or drop_last


def test_distributed_sampler_epochs_differ():
    s = D.DistributedSampler(range(30), num_replicas=1, rank=0)
    a = list(s)
    s.set_epoch(1)
    assert list(s) != a and sorted(s) == sorted(a)
    assert list(D.DistributedSampler(range(30))) == a  # NOTE: one JAX process: the whole dataset


@pytest.mark.parametrize("n, lengths", [(10, [3, 7]), (10, [0.3, 0.3, 0.4]), (10, [0.33, 0.33, 0.34]),
                                        (11, [0.5, 0.5]), (3, [0.1, 0.9]), (5, [1.0]), (3, [-1, 4])])
def test_random_split_lengths(n, lengths):
    ours, theirs = D.random_split(range(n), lengths), T.random_split(range(n), lengths)
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert sorted(i for s in ours for i in s) == sorted(i for s in theirs for i in s)
    assert all(isinstance(s, D.Subset) for s in ours)


def test_random_split_reproducible_and_warns_like_torch():
    g = aotjax.Generator()
    assert [s.indices for s in D.random_split(range(9), [4, 5], generator=g.manual_seed(2))] == \
        [s.indices for s in D.random_split(range(9), [4, 5], generator=g.manual_seed(2))]
    aotjax.manual_seed(5)
    a = D.random_split(range(9), [4, 5])[0].indices
    aotjax.manual_seed(5)
    assert D.random_split(range(9), [4, 5])[0].indices == a
    with pytest.warns(UserWarning) as ours:
        D.random_split(range(2), [0.1, 0.1, 0.8])
    with pytest.warns(UserWarning) as theirs:
        T.random_split(range(2), [0.1, 0.1, 0.8])
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]


# -- collation -----------------------------------------------------------------------------------------
COLLATE_CASES = [
    [1, 2], [1.0, 2.5], [True, False], [1, 2.0], ["a", "b"], [b"a", b"b"], [np.float32(1), np.float32(2)],
    [np.int64(1)], [np.bool_(True)], [np.array(1.5)], [np.str_("a")], [(1, 2), (3, 4)], [[1, 2], [3, 4]],
    [Point(1, 2.0), Point(3, 4.0)], [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}], [collections.OrderedDict(a=1)],
    [range(2), range(2)], ["a", 1],
]


@pytest.mark.parametrize("batch", COLLATE_CASES, ids=range(len(COLLATE_CASES)))
def test_default_collate_against_torch(batch):
    assert_same(D.default_collate(batch), T.default_collate(batch))


CONVERT_CASES = [[1, 2], np.array([1, 2]), (np.array(1), 2), Point(np.array(1), 2), {"a": np.float64(1)}, "s",
                 1.5, np.float32(2), [np.array([1.0], np.float32)]]


@pytest.mark.parametrize("data", CONVERT_CASES, ids=range(len(CONVERT_CASES)))
def test_default_convert_against_torch(data):
    assert_same(D.default_convert(data), T.default_convert(data))


def test_default_convert_keeps_string_arrays_and_tensors():
    strings = np.array(["a"])
    assert D.default_convert(strings) is strings
    t = aotjax.tensor([1.0])
    assert D.default_convert(t) is t


def test_collate_tensors_stacks_and_mismatch_is_stacks_error():
    out = D.default_collate([aotjax.tensor([1.0, 2.0]), aotjax.tensor([3.0, 4.0])])
    assert out.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    for batch in ([np.array([1, 2]), np.array([3])], [aotjax.tensor([1]), aotjax.tensor([1, 2])]):
        with pytest.raises(ShapeError, match="stack: expects each tensor to be of equal shape"):
            D.default_collate(batch)
    assert D.default_collate([torch.tensor([1.0]), torch.tensor([2.0])]).tolist() == [[1.0], [2.0]]


# -- errors: torch's class and message ------------------------------------------------------------------
def it(M):
    return type("It", (M.IterableDataset,), {"__iter__": lambda self: iter(range(5))})()


def set_after_init(M, name, value):
    setattr(M.DataLoader(range(4)), name, value)


ERRORS = {
    "num_workers<0": lambda M, lib: M.DataLoader(range(4), num_workers=-1),
    "timeout<0": lambda M, lib: M.DataLoader(range(4), timeout=-1),
    "prefetch_no_workers": lambda M, lib: M.DataLoader(range(4), prefetch_factor=2),
    "prefetch<0": lambda M, lib: M.DataLoader(range(4), num_workers=1, prefetch_factor=-1),
    "persistent_no_workers": lambda M, lib: M.DataLoader(range(4), persistent_workers=True),
    "iterable_shuffle": lambda M, lib: M.DataLoader(it(M), shuffle=True),
    "iterable_sampler": lambda M, lib: M.DataLoader(it(M), sampler=[1]),
    "iterable_batch_sampler": lambda M, lib: M.DataLoader(it(M), batch_sampler=[[1]]),
    "sampler_shuffle": lambda M, lib: M.DataLoader(range(4), sampler=[1], shuffle=True),
    "batch_sampler_batch_size": lambda M, lib: M.DataLoader(range(4), batch_sampler=[[1]], batch_size=2),
    "batch_sampler_drop_last": lambda M, lib: M.DataLoader(range(4), batch_sampler=[[1]], drop_last=True),
    "batch_sampler_shuffle": lambda M, lib: M.DataLoader(range(4), batch_sampler=[[1]], shuffle=True),
    "batch_sampler_sampler": lambda M, lib: M.DataLoader(range(4), batch_sampler=[[1]], sampler=[0]),
    "no_batch_drop_last": lambda M, lib: M.DataLoader(range(4), batch_size=None, drop_last=True),
    "context_no_workers": lambda M, lib: M.DataLoader(range(4), multiprocessing_context="spawn"),
    "context_bad_name": lambda M, lib: M.DataLoader(range(4), num_workers=1, multiprocessing_context="bogus"),
    "context_bad_type": lambda M, lib: M.DataLoader(range(4), num_workers=1, multiprocessing_context=3),
    "batch_size=0": lambda M, lib: M.DataLoader(range(4), batch_size=0),
    "batch_size=-1": lambda M, lib: M.DataLoader(range(4), batch_size=-1),
    "batch_size=True": lambda M, lib: M.DataLoader(range(4), batch_size=True),
    "batch_size=2.0": lambda M, lib: M.DataLoader(range(4), batch_size=2.0),
    "drop_last=1": lambda M, lib: M.DataLoader(range(4), drop_last=1),
    "set_batch_size": lambda M, lib: set_after_init(M, "batch_size", 3),
    "set_sampler": lambda M, lib: set_after_init(M, "sampler", [0]),
    "set_dataset": lambda M, lib: set_after_init(M, "dataset", [0]),
    "set_drop_last": lambda M, lib: set_after_init(M, "drop_last", True),
    "set_batch_sampler": lambda M, lib: set_after_init(M, "batch_sampler", None),
    "set_persistent_workers": lambda M, lib: set_after_init(M, "persistent_workers", True),
    "len_iterable_without_len": lambda M, lib: len(M.DataLoader(it(M), batch_size=2)),
    "random_replacement": lambda M, lib: M.RandomSampler(range(4), replacement=1),
    "random_num_samples=0": lambda M, lib: M.RandomSampler(range(4), num_samples=0),
    "random_num_samples=2.0": lambda M, lib: M.RandomSampler(range(4), num_samples=2.0),
    "random_empty": lambda M, lib: M.RandomSampler([]),
    "weighted_num_samples": lambda M, lib: M.WeightedRandomSampler([1.0, 2.0], 0),
    "weighted_replacement": lambda M, lib: M.WeightedRandomSampler([1.0, 2.0], 2, replacement=1),
    "weighted_2d": lambda M, lib: M.WeightedRandomSampler([[1.0, 2.0]], 2),
    "weighted_too_many": lambda M, lib: list(M.WeightedRandomSampler([1.0, 2.0], 5, replacement=False)),
    "weighted_zero_sum": lambda M, lib: list(M.WeightedRandomSampler([0.0, 0.0], 2)),
    "weighted_negative": lambda M, lib: list(M.WeightedRandomSampler([-1.0, 2.0], 2)),
    "batch_sampler_size": lambda M, lib: M.BatchSampler(range(4), 0, False),
    "batch_sampler_drop": lambda M, lib: M.BatchSampler(range(4), 2, None),
    "sampler_len": lambda M, lib: len(M.Sampler()),
    "sampler_iter": lambda M, lib: iter(M.Sampler()),
    "distributed_rank_high": lambda M, lib: M.DistributedSampler(range(4), num_replicas=2, rank=2),
    "distributed_rank_neg": lambda M, lib: M.DistributedSampler(range(4), num_replicas=2, rank=-1),
    "split_sum": lambda M, lib: M.random_split(range(10), [3, 3]),
    "split_sum_fractions": lambda M, lib: M.random_split(range(3), [0.5, 0.6]),
    "split_fraction": lambda M, lib: M.random_split(range(3), [-0.5, 1.5]),
    "concat_empty": lambda M, lib: M.ConcatDataset([]),
    "concat_iterable": lambda M, lib: M.ConcatDataset([it(M)]),
    "concat_index_low": lambda M, lib: M.ConcatDataset([range(3), range(4)])[-8],
    "concat_index_high": lambda M, lib: M.ConcatDataset([range(3), range(4)])[7],
    "chain_not_iterable": lambda M, lib: list(M.ChainDataset([it(M), range(3)])),
    "chain_len": lambda M, lib: len(M.ChainDataset([it(M)])),
    "tensors_mismatch": lambda M, lib: M.TensorDataset(lib.zeros(3), lib.zeros(4)),
    "stack_none": lambda M, lib: M.StackDataset(),
    "stack_both": lambda M, lib: M.StackDataset(range(3), a=range(3)),
    "stack_mismatch": lambda M, lib: M.StackDataset(range(3), range(4)),
    "dataset_getitem": lambda M, lib: M.Dataset()[0],
    "dataset_len": lambda M, lib: len(M.Dataset()),
    "iterable_abstract": lambda M, lib: M.IterableDataset(),
    "collate_object": lambda M, lib: M.default_collate([object()]),
    "collate_none": lambda M, lib: M.default_collate([None]),
    "collate_complex": lambda M, lib: M.default_collate([1 + 2j]),
    "collate_string_array": lambda M, lib: M.default_collate([np.array(["a"])]),
    "collate_object_array": lambda M, lib: M.default_collate([np.array([1, 2], dtype=object)]),
    "collate_ragged": lambda M, lib: M.default_collate([[1, 2], [3]]),
    "collate_keys": lambda M, lib: M.default_collate([{"a": 1}, {"b": 2}]),
    "collate_dict_then_int": lambda M, lib: M.default_collate([{"a": 1}, 2]),
    "collate_empty": lambda M, lib: M.default_collate([]),
}


def _raised(f):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            f()
        except Exception as e:
            return e
    return None


@pytest.mark.parametrize("case", ERRORS)
def test_errors_are_torchs(case):
    ours, theirs = _raised(lambda: ERRORS[case](D, aotjax)), _raised(lambda: ERRORS[case](T, torch))
    assert theirs is not None and ours is not None, (ours, theirs)
    assert type(ours) is type(theirs), (ours, theirs)
    assert str(ours).startswith(str(theirs)[:60]), (str(ours), str(theirs))


def test_mutable_attributes_and_worker_info_outside_workers():
    dl = D.DataLoader(range(4))
    dl.num_workers, dl.collate_fn = 0, None  # NOTE: torch lets these change
    assert D.get_worker_info() is None and T.get_worker_info() is None
    assert D.DataLoader(range(4), num_workers=2).prefetch_factor == 2 and D.DataLoader(range(4)).prefetch_factor is None
    assert isinstance(D.DataLoader(range(4), shuffle=True).sampler, D.RandomSampler)
    assert D.DataLoader(range(4), batch_size=None).batch_sampler is None


def test_surface_is_torchs():
    for name in D.__all__:
        assert hasattr(T, name), name
    assert aotjax.utils.data is D


# -- worker processes ----------------------------------------------------------------------------------
_init_mark = None  # set by `_init_worker` in a worker


def _init_worker(worker_id: int) -> None:
    global _init_mark
    _init_mark = 100 + worker_id + 10 * D.get_worker_info().num_workers


class WhoLoads(D.Dataset):
    """Index, the loading worker's id and what its `worker_init_fn` set."""

    def __getitem__(self, i):
        info = D.get_worker_info()
        return {"i": i, "worker": info.id, "init": _init_mark, "x": aotjax.tensor([float(i)]) * 2}

    def __len__(self):
        return 10


class Sharded(D.IterableDataset):
    """Each worker yields its own share of `range(n)`."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = D.get_worker_info()
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        return self.n


@pytest.mark.slow
def test_workers_map_and_iterable_datasets():
    dl = D.DataLoader(WhoLoads(), batch_size=3, num_workers=2, worker_init_fn=_init_worker, persistent_workers=True)
    for _ in range(2):  # NOTE: persistent workers: the second epoch reuses them
        batches = list(dl)
        assert [b["i"].tolist() for b in batches] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
        assert batches[0]["i"].dtype == canonicalize_dtype("int64")  # NOTE: the workers run in the main's x64 mode
        assert [b["worker"].tolist() for b in batches] == [[0] * 3, [1] * 3, [0] * 3, [1]]
        assert [b["init"].tolist()[0] for b in batches] == [120, 121, 120, 121]
        assert batches[1]["x"].tolist() == [[6.0], [8.0], [10.0]] and isinstance(batches[1]["x"], aotjax.Tensor)
    assert dl._pool is not None and all(w.is_alive() for w in dl._pool._workers)
    stream = D.DataLoader(Sharded(10), batch_size=2, num_workers=2)
    assert [b.tolist() for b in stream] == [[0, 2], [1, 3], [4, 6], [5, 7], [8], [9]]  # NOTE: torch's interleaving
    assert len(stream) == 5


@pytest.mark.slow
def test_workers_shuffle_errors_and_timeout():
    ds = D.TensorDataset(aotjax.arange(12.0).reshape(6, 2), aotjax.arange(6))
    aotjax.manual_seed(1)
    got = [(x.tolist(), y.tolist()) for x, y in D.DataLoader(ds, batch_size=4, shuffle=True, num_workers=2)]
    aotjax.manual_seed(1)  # NOTE: the order does not depend on num_workers, as in torch
    assert got == [(x.tolist(), y.tolist()) for x, y in D.DataLoader(ds, batch_size=4, shuffle=True)]
    assert sorted(i for _, y in got for i in y) == list(range(6))
    with pytest.raises(IndexError, match="Caught IndexError in DataLoader worker process 0"):
        list(D.DataLoader(D.Subset(range(3), [5]), num_workers=1))
    # NOTE: builtins only: these workers need not import this module
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 0.2 seconds"):
        list(D.DataLoader([0.6], batch_size=None, collate_fn=time.sleep, num_workers=1, timeout=0.2))


@pytest.mark.slow
@pytest.mark.x32_only
def test_importing_aotjax_is_fork_safe():
    """The fork server imports aotjax, then forks the workers (`pool.default_context`): the import must start no
    thread and no JAX runtime."""
    probe = ("import threading, aotjax; from jax._src import xla_bridge; "
             "print(threading.active_count(), xla_bridge.backends_are_initialized())")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "False"]


def test_workers_need_picklable_functions():
    with pytest.raises(TypeError, match="DataLoader: num_workers=1 sends the dataset"):
        iter(D.DataLoader(range(4), num_workers=1, collate_fn=lambda b: b))


# -- a training loop over a DataLoader --------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.x32_only  # NOTE: modules compute in the default float (float32) in both modes: run once
def test_training_over_a_dataloader_matches_torch():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(20, 4)).astype(np.float32), rng.integers(0, 3, size=20)
    torch.manual_seed(0)
    tm = torch.nn.Linear(4, 3)
    m = aotjax.nn.Linear(4, 3)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    opt = aotjax.optim.SGD(m.parameters(), lr=0.1)  # NOTE: torch's side by hand: torch.optim imports dynamo (4 s)
    tloader = T.DataLoader(T.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=10)
    loader_ = D.DataLoader(D.TensorDataset(aotjax.tensor(x), aotjax.tensor(y)), batch_size=10)
    for _ in range(2):
        for (xb, yb), (txb, tyb) in zip(loader_, tloader, strict=True):
            opt.zero_grad()
            loss = aotjax.nn.functional.cross_entropy(m(xb), yb)
            loss.backward()
            opt.step()
            tm.zero_grad()
            tloss = torch.nn.functional.cross_entropy(tm(txb), tyb)
            tloss.backward()
            with torch.no_grad():
                for p in tm.parameters():
                    p -= 0.1 * p.grad
            np.testing.assert_allclose(float(loss), float(tloss.detach()), rtol=1e-5)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(np.asarray(m.state_dict()[k]), v.numpy(), rtol=1e-5, atol=1e-6)


class Overlong(D.IterableDataset):
    """Says it has 3 items and yields 7 (`get_worker_info()` unused: with workers each yields all of them)."""

    def __iter__(self):
        return iter(range(7))

    def __len__(self):
        return 3


def _warnings_of(fn) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_an_iterable_dataset_yielding_more_than_its_length_warns_as_torch():
    class TorchOverlong(T.IterableDataset):
        __iter__, __len__ = Overlong.__iter__, Overlong.__len__

    def run(lib, dataset):
        loader = lib.DataLoader(dataset, batch_size=2)
        assert len(loader) == 2
        return _warnings_of(lambda: list(loader))

    ours, theirs = run(D, Overlong()), run(T, TorchOverlong())
    assert len(ours) == len(theirs) == 1  # 4 batches fetched against the dataset's length, 3 (torch's comparison)
    assert "was reported to be 3" in ours[0] and "but 4 samples have been fetched" in ours[0]
    assert _warnings_of(lambda: list(D.DataLoader(Overlong(), batch_size=2))) == []  # len() never asked


@pytest.mark.slow
def test_workers_yielding_more_than_the_length_warn_naming_the_replicas():
    loader = D.DataLoader(Overlong(), batch_size=4, num_workers=2)
    len(loader)
    messages = _warnings_of(lambda: list(loader))
    assert messages and "replica at each worker" in messages[0]


def test_more_workers_than_cpus_warns_at_construction_as_torch():
    import os

    many = len(os.sched_getaffinity(0)) + 1
    for lib in (D, T):
        messages = _warnings_of(functools.partial(lib.DataLoader, list(range(4)), num_workers=many))
        assert len(messages) == 1 and f"will create {many} worker processes" in messages[0], lib
    assert _warnings_of(lambda: D.DataLoader(list(range(4)), num_workers=1)) == []
