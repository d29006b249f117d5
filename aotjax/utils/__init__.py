"""`torch.utils`: `aotjax.utils.data`, PyTorch's data loading API (datasets, samplers, `DataLoader`), and
`aotjax.utils.checkpoint`, its activation checkpointing calls."""
from aotjax.utils import checkpoint, data  # noqa: F401

__all__ = ["checkpoint", "data"]
