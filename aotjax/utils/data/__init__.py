"""`torch.utils.data`: datasets (`dataset.py`), samplers (`sampler.py`, `distributed.py`), collation (`collate.py`)
and the `DataLoader` (`dataloader.py`; worker processes in `pool.py` and `worker.py`), with PyTorch's names,
arguments, semantics and errors. Batches are aotjax Tensors; shuffling draws from aotjax's generators.

>>> from aotjax.utils.data import DataLoader, TensorDataset
>>> x, y = aotjax.arange(8.0).reshape(4, 2), aotjax.tensor([0, 1, 0, 1])
>>> for xb, yb in DataLoader(TensorDataset(x, y), batch_size=3):
...     print(tuple(xb.shape), yb.tolist())
(3, 2) [0, 1, 0]
(1, 2) [1]
"""
from aotjax.utils.data.collate import default_collate, default_convert
from aotjax.utils.data.dataloader import DataLoader
from aotjax.utils.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from aotjax.utils.data.distributed import DistributedSampler
from aotjax.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from aotjax.utils.data.worker import get_worker_info

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DistributedSampler", "default_collate", "default_convert",
           "DataLoader", "get_worker_info"]
