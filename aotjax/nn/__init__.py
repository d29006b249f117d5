"""Neural-network building blocks, as `torch.nn`: `Module` and `Parameter`, the layers (`Linear`,
`Embedding`, `LayerNorm`, `RMSNorm`, `BatchNorm1d`/`BatchNorm2d`, `Dropout`, activations,
`MultiheadAttention`, the containers `Sequential`, `ModuleList`, `ModuleDict`), `aotjax.nn.init` (PyTorch's
initializations) and `aotjax.nn.functional` (the functional forms: `linear`, `batch_norm`, `softmax`,
`layer_norm`, `cross_entropy`, `scaled_dot_product_attention`, ...), and `scan_layers` (identical layers run as
one `scan` over their stacked state).

>>> net = aotjax.nn.Sequential(aotjax.nn.Linear(4, 8), aotjax.nn.ReLU(), aotjax.nn.Linear(8, 1))
>>> net(aotjax.ones(2, 4)).shape
(2, 1)
"""
from aotjax.nn import functional, init, parallel, utils  # noqa: F401
from aotjax.nn.module import Module
from aotjax.nn.modules import *  # noqa: F401,F403
from aotjax.nn.modules import __all__ as _layers
from aotjax.nn.parallel import DataParallel
from aotjax.nn.parameter import Parameter
from aotjax.nn.scan_layers import scan_layers

__all__ = ["functional", "init", "Module", "Parameter", "scan_layers", "parallel", "DataParallel"] + _layers
