"""`torch.utils`: `aotjax.utils.data`, PyTorch's data loading API (datasets, samplers, `DataLoader`)."""
from aotjax.utils import data  # noqa: F401

__all__ = ["data"]
