"""Neural-network building blocks, as `torch.nn`: `aotjax.nn.functional` holds the functional forms
(`softmax`, `layer_norm`, `cross_entropy`, `scaled_dot_product_attention`, ...)."""
from aotjax.nn import functional  # noqa: F401

__all__ = ["functional"]
