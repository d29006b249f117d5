"""The layers of `aotjax.nn`, one file per family as in `torch.nn.modules`."""
from aotjax.nn.modules import module  # noqa: F401
from aotjax.nn.modules.activation import GELU, MultiheadAttention, ReLU, Sigmoid, SiLU, Softmax, Softmax2d, Tanh
from aotjax.nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from aotjax.nn.modules.channelshuffle import ChannelShuffle
from aotjax.nn.modules.container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from aotjax.nn.modules.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from aotjax.nn.modules.dropout import Dropout
from aotjax.nn.modules.embedding_bag import EmbeddingBag
from aotjax.nn.modules.groupnorm import *  # noqa: F403
from aotjax.nn.modules.groupnorm import __all__ as _GROUPNORM
from aotjax.nn.modules.layer_stack import LayerStack
from aotjax.nn.modules.linear import Bilinear, Identity, Linear
from aotjax.nn.modules.loss import *  # noqa: F403
from aotjax.nn.modules.loss import __all__ as _LOSS
from aotjax.nn.modules.nonlinearity import *  # noqa: F403
from aotjax.nn.modules.nonlinearity import __all__ as _NONLINEARITY
from aotjax.nn.modules.normalization import LayerNorm, RMSNorm
from aotjax.nn.modules.padding import *  # noqa: F403
from aotjax.nn.modules.padding import __all__ as _PADDING
from aotjax.nn.modules.pixelshuffle import PixelShuffle, PixelUnshuffle
from aotjax.nn.modules.pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    Flatten,
    Fold,
    FractionalMaxPool2d,
    FractionalMaxPool3d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
    Unflatten,
    Unfold,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
    ZeroPad2d,
)
from aotjax.nn.modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from aotjax.nn.modules.sparse import Embedding
from aotjax.nn.modules.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = ["Linear", "Identity", "Embedding", "LayerNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "Dropout",
           "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "MultiheadAttention", "Sequential", "ModuleList",
           "ModuleDict",
           "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "MaxPool1d",
           "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
           "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "Flatten", "Unflatten",
           "Upsample", "ZeroPad2d"]
__all__ += _NONLINEARITY + _LOSS + _GROUPNORM + ["EmbeddingBag"]
__all__ += ["Bilinear", "ChannelShuffle", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]
__all__ += ["FractionalMaxPool2d", "FractionalMaxPool3d"]
__all__ += _PADDING + ["PixelShuffle", "PixelUnshuffle", "BatchNorm3d"]
__all__ += ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
__all__ += ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
            "TransformerDecoderLayer"]
__all__ += ["ParameterList", "ParameterDict", "Fold", "Unfold", "Softmax2d", "UpsamplingNearest2d",
            "UpsamplingBilinear2d", "LPPool1d", "LPPool2d", "LPPool3d"]
__all__ += ["LayerStack"]
