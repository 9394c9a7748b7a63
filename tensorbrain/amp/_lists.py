"""Which ops autocast changes, per device type: PyTorch's op lists (aten/src/ATen/autocast_mode.cpp).

An op that is in no list runs in the dtypes it is given (a bfloat16 activation stays bfloat16
through relu, max_pool2d, dropout, an add with another bfloat16 tensor), as in PyTorch. Names are
PyTorch's; an op listed here that TensorBrain does not have yet simply never asks.

Policies:

* ``lower``: floating inputs (not float64) are cast to the autocast dtype, the op runs and
  returns that dtype;
* ``fp32``: floating inputs in a lower precision are cast to float32, the output is float32;
* ``promote``: floating inputs are cast to the widest floating dtype among them;
* ``input``: TensorBrain's own: for ops whose PyTorch kernels take a lower-precision input with
  float32 parameters and return the input's dtype (batch_norm; layer_norm and group_norm on
  CPU). NumPy would promote that mix to float32, so the op runs in float32 and its output is
  rounded to the input's dtype;
* ``banned``: raises (PyTorch refuses ``binary_cross_entropy`` under CUDA autocast).
"""
from __future__ import annotations

_LOWER_COMMON = (
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "prelu", "addmm", "matmul", "mm", "bmm", "baddbmm", "addbmm", "linear", "linalg_vecdot",
    "scaled_dot_product_attention",
)

_LOSSES_FP32 = (
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "kl_div", "binary_cross_entropy_with_logits", "cosine_embedding_loss",
    "hinge_embedding_loss", "poisson_nll_loss", "margin_ranking_loss", "soft_margin_loss",
    "triplet_margin_loss", "multi_margin_loss", "multilabel_margin_loss", "ctc_loss",
)

CPU = {
    **{name: "lower" for name in _LOWER_COMMON},
    **{name: "fp32" for name in _LOSSES_FP32},
    **{name: "fp32" for name in ("binary_cross_entropy", "prod", "cdist", "trace",
                                  "avg_pool3d", "max_pool3d", "adaptive_avg_pool3d")},
    **{name: "input" for name in ("batch_norm", "layer_norm", "group_norm")},
}

CUDA = {
    **{name: "lower" for name in _LOWER_COMMON + (
        "addmv", "addr", "mv", "einsum", "chain_matmul", "linalg_multi_dot", "lstm_cell",
        "gru_cell", "rnn_tanh_cell", "rnn_relu_cell")},
    **{name: "fp32" for name in _LOSSES_FP32},
    **{name: "fp32" for name in (
        "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
        "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "group_norm",
        "norm", "cosine_similarity", "normalize", "dist", "pdist", "cdist", "renorm",
        "logsumexp", "softmax", "log_softmax", "softmin", "cumprod", "cumsum", "prod", "sum",
        "interpolate")},
    **{name: "promote" for name in ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot",
                                     "vdot", "grid_sample", "index_put", "scatter_add",
                                     "tensordot")},
    "batch_norm": "input",
    "binary_cross_entropy": "banned",
}

POLICIES = {"cpu": CPU, "cuda": CUDA}

BANNED_MESSAGE = (
    "tb.nn.functional.binary_cross_entropy and tb.nn.BCELoss are unsafe to autocast (as in "
    "PyTorch): many models use a sigmoid right before the loss, and in float16 that loses "
    "precision. Use binary_cross_entropy_with_logits / BCEWithLogitsLoss, which is safe to "
    "autocast, or run the loss outside the autocast region on float32 inputs.")
