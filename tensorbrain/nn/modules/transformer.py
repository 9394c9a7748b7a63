"""Transformer layers, as ``torch.nn``: ``TransformerEncoderLayer``, ``TransformerEncoder``,
``TransformerDecoderLayer``, ``TransformerDecoder`` and ``Transformer``.

Parameter names follow PyTorch (``self_attn.in_proj_weight``, ``linear1.weight``, ``norm1``...),
so a state dict moves between the two; the math is PyTorch's (post-norm by default,
``norm_first=True`` for pre-norm). torch's inference fast paths (nested tensors, the fused
encoder kernel) have no counterpart: they compute the same values.
"""
from __future__ import annotations

import copy

import numpy as np

from ... import _dtype
from ...tensor import Tensor
from .. import functional as F
from .. import init
from .attention import MultiheadAttention, NonDynamicallyQuantizableLinear  # noqa: F401
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]


def _activation(activation):
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    if not callable(activation):
        raise TypeError(f"activation must be 'relu', 'gelu' or a callable, got {activation!r}")
    return activation


def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _square_subsequent_mask(sz, device=None, dtype=None):
    dtype = dtype or _dtype.get_default_dtype()
    arr = np.triu(np.full((sz, sz), -np.inf, dtype=np.float32), k=1)
    return Tensor._wrap(arr).to(device=device or "cpu", dtype=dtype)


class TransformerEncoderLayer(Module):
    """Self-attention + feed-forward block with residuals and LayerNorm (PyTorch's layout).

    Args: ``d_model, nhead, dim_feedforward=2048, dropout=0.1, activation='relu' (or 'gelu' or
    a callable), layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True``.
    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``.

    >>> import tensorbrain as tb
    >>> layer = tb.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)
    >>> layer(tb.randn(2, 7, 16)).shape
    tb.Size([2, 7, 16])
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` (``layers.0``, ...) and an optional
    final ``norm``. ``forward(src, mask=None, src_key_padding_mask=None, is_causal=None)``.

    ``enable_nested_tensor`` and ``mask_check`` are accepted for torch programs; they select a
    torch inference fast path that computes the same values.

    Args:
        encoder_layer: a :class:`TransformerEncoderLayer`, copied ``num_layers`` times.
        num_layers: the number of layers.
        norm: a module applied to the output; None for none.
        enable_nested_tensor: accepted for torch compatibility.
        mask_check: accepted for torch compatibility.
    """

    def __init__(self, encoder_layer, num_layers: int, norm=None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                         is_causal=bool(is_causal) and mask is not None)
        if self.norm is not None:
            output = self.norm(output)
        return output


class TransformerDecoderLayer(Module):
    """Self-attention, cross-attention over ``memory`` and feed-forward, each with residual and
    LayerNorm (torch's names: ``self_attn``, ``multihead_attn``, ``linear1/2``, ``norm1/2/3``).

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``.

    >>> import tensorbrain as tb
    >>> layer = tb.nn.TransformerDecoderLayer(8, 2, 16, batch_first=True)
    >>> layer(tb.randn(2, 5, 8), tb.randn(2, 7, 8)).shape
    tb.Size([2, 5, 8])

    Args:
        d_model: the number of features of the input and output.
        nhead: the number of attention heads; must divide ``d_model``.
        dim_feedforward: the width of the feed-forward network.
        dropout: the dropout probability.
        activation: ``"relu"``, ``"gelu"`` or a callable.
        layer_norm_eps: the LayerNorms' eps.
        batch_first: tensors are ``(N, L, E)`` instead of ``(L, N, E)``.
        norm_first: LayerNorm before each block (pre-norm) instead of after it.
        bias: learn the biases of the linear layers and LayerNorms.
        device: the device of the parameters.
        dtype: the dtype of the parameters.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                    memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` and an optional final ``norm``.

    Args:
        decoder_layer: a :class:`TransformerDecoderLayer`, copied ``num_layers`` times.
        num_layers: the number of layers.
        norm: a module applied to the output; None for none.
    """

    def __init__(self, decoder_layer, num_layers: int, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal: bool = False):
        output = tgt
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=bool(tgt_is_causal) and tgt_mask is not None,
                         memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """Encoder-decoder transformer ("Attention Is All You Need"), torch's layout and init
    (xavier_uniform_ on every parameter with more than one dim).

    ``forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    src_is_causal=None, tgt_is_causal=None, memory_is_causal=False)``.

    >>> import tensorbrain as tb
    >>> model = tb.nn.Transformer(16, 2, 1, 1, 32, batch_first=True)
    >>> mask = tb.nn.Transformer.generate_square_subsequent_mask(4)
    >>> model(tb.randn(2, 6, 16), tb.randn(2, 4, 16), tgt_mask=mask).shape
    tb.Size([2, 4, 16])

    Args:
        d_model: the number of features of the inputs and output.
        nhead: the number of attention heads; must divide ``d_model``.
        num_encoder_layers: the number of encoder layers.
        num_decoder_layers: the number of decoder layers.
        dim_feedforward: the width of the feed-forward networks.
        dropout: the dropout probability.
        activation: ``"relu"``, ``"gelu"`` or a callable.
        custom_encoder: a module used as the encoder instead of the built one.
        custom_decoder: a module used as the decoder instead of the built one.
        layer_norm_eps: the LayerNorms' eps.
        batch_first: tensors are ``(N, L, E)`` instead of ``(L, N, E)``.
        norm_first: LayerNorm before each block (pre-norm) instead of after it.
        bias: learn the biases of the linear layers and LayerNorms.
        device: the device of the parameters.
        dtype: the dtype of the parameters.
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation="relu", custom_encoder=None, custom_decoder=None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            enc_layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                                activation, layer_norm_eps, batch_first,
                                                norm_first, bias, **kw)
            self.encoder = TransformerEncoder(enc_layer, num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                        **kw))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            dec_layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout,
                                                activation, layer_norm_eps, batch_first,
                                                norm_first, bias, **kw)
            self.decoder = TransformerDecoder(dec_layer, num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                        **kw))
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal: bool = False):
        batched = src.dim() == 3
        b = 0 if self.batch_first else 1
        if batched and src.shape[b] != tgt.shape[b]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
        """A ``(sz, sz)`` float mask: -inf above the diagonal, 0 elsewhere (causal).

        Args:
            sz: the sequence length.
            device: the device of the mask.
            dtype: the dtype of the mask; None for the default dtype.

        Returns:
            Tensor: the mask.
        """
        return _square_subsequent_mask(sz, device, dtype)

