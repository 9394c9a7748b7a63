"""The layer classes of ``tb.nn``, one file per family as in ``torch/nn/modules``."""
from .activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .dropout import Dropout
from .flatten import Flatten, Unflatten
from .linear import Bilinear, Identity, Linear  # noqa: F401
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .loss import (BCELoss, CosineEmbeddingLoss, CTCLoss, HuberLoss, KLDivLoss,  # noqa: F401
                   MarginRankingLoss, SmoothL1Loss, TripletMarginLoss)
from .pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from .module import Module, RemovableHandle
from .normalization import GroupNorm, LayerNorm
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,  # noqa: F401
                      AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool3d, MaxPool1d,
                      MaxPool3d)
from .activation import (CELU, GLU, SELU, Hardshrink, Softmax2d, Softmin,  # noqa: F401
                         Softshrink, Softsign, Tanhshrink, Threshold)
from .distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from .fold import Fold, Unfold  # noqa: F401
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: F401
from . import lazy as _lazy
from . import padding as _padding
from .padding import PADS as _PADS
from .activation import (ELU, Hardsigmoid, Hardswish, Hardtanh, LogSigmoid, Mish,  # noqa: F401
                         PReLU, ReLU6, Softplus)
from .dropout import (AlphaDropout, Dropout1d, Dropout2d, Dropout3d,  # noqa: F401
                      FeatureAlphaDropout)
from .normalization import LocalResponseNorm, RMSNorm  # noqa: F401
from .sparse import EmbeddingBag  # noqa: F401
from .rnn import (GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell,  # noqa: F401
                  RNNCellBase)
from .sparse import Embedding
from .transformer import MultiheadAttention, TransformerEncoderLayer
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: F401
                          TransformerEncoder)

_SEQUENCE = [  # the sequence layers and the other layers real programs use
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
    "Mish", "Hardswish", "Hardsigmoid", "ReLU6", "LogSigmoid", "Softplus", "ELU", "Hardtanh",
    "PReLU", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    "RMSNorm", "EmbeddingBag", "TransformerEncoder", "TransformerDecoderLayer",
    "TransformerDecoder", "Transformer"]

__all__ = [
    "Module", "RemovableHandle", "Identity", "Linear", "Conv2d", "BatchNorm1d", "BatchNorm2d",
    "LayerNorm", "GroupNorm", "Dropout", "Embedding", "ReLU", "LeakyReLU", "GELU", "SiLU", "Tanh",
    "Sigmoid", "Softmax", "LogSoftmax", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Flatten",
    "Unflatten", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss",
    "MultiheadAttention", "TransformerEncoderLayer", *_SEQUENCE,
]
__all__ += ["Conv1d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]
__all__ += ["BCELoss", "KLDivLoss", "SmoothL1Loss", "HuberLoss", "CosineEmbeddingLoss",
            "MarginRankingLoss", "TripletMarginLoss", "CTCLoss"]
__all__ += ["PixelShuffle", "PixelUnshuffle", "Upsample", "UpsamplingNearest2d",
            "UpsamplingBilinear2d"]
globals().update({name: getattr(_padding, name) for name in _PADS})  # ZeroPad2d, ... (padding.py)
globals().update({name: getattr(_lazy, name) for name in _lazy.LAZY})  # LazyLinear, ... (lazy.py)
__all__ += ["BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "MaxPool1d",
            "MaxPool3d", "AvgPool1d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool3d",
            "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "GLU", "SELU", "CELU",
            "Softsign", "Tanhshrink", "Softshrink", "Hardshrink", "Threshold", "Softmin",
            "Softmax2d", "CosineSimilarity", "PairwiseDistance", "Fold", "Unfold", *sorted(_PADS),
            *sorted(_lazy.LAZY), "Bilinear", "LocalResponseNorm"]


def __getattr__(name):
    # torch.nn.modules.SyncBatchNorm (sync_batchnorm.py builds on batchnorm.py; loaded on use)
    if name == "SyncBatchNorm":
        from .sync_batchnorm import SyncBatchNorm
        return SyncBatchNorm
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
