"""Recurrent layers, as ``torch.nn.RNN``/``LSTM``/``GRU`` and their single-step cells.

Parameter names, shapes, gate order and initialisation are torch's (``weight_ih_l0``,
``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, ``weight_hr_l0`` with ``proj_size``, and the
``_reverse`` twins; all U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))), so a torch state dict
loads unchanged. Each layer and direction runs as one fused graph node
(``tensorbrain/_ops/rnn.py``): one GEMM for all input projections, one GEMM and a few in-place
ufuncs per timestep.

>>> import tensorbrain as tb
>>> lstm = tb.nn.LSTM(10, 20, num_layers=2, batch_first=True)
>>> out, (h, c) = lstm(tb.randn(3, 5, 10))
>>> out.shape, h.shape, c.shape
(tb.Size([3, 5, 20]), tb.Size([2, 3, 20]), tb.Size([2, 3, 20]))
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ... import _dtype
from ..._ops import shape as _S
from ..._ops.rnn import GATES, recurrent_layer
from ..._xp import get_array_module, to_numpy
from ...tensor import Tensor, empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


def _zeros_like_state(like, shape):
    xp = get_array_module(like._data)
    return Tensor._wrap(xp.zeros(shape, dtype=like._data.dtype))


class RNNBase(Module):
    """The shared machinery of :class:`RNN`, :class:`LSTM` and :class:`GRU` (torch's layout).

    Args:
        mode: "LSTM", "GRU", "RNN_TANH" or "RNN_RELU".
        input_size, hidden_size: feature sizes of the input and of the hidden state.
        num_layers: stacked layers (each takes the previous one's output).
        bias: whether the layers have ``bias_ih``/``bias_hh``.
        batch_first: inputs and outputs are ``(batch, seq, feature)`` instead of
            ``(seq, batch, feature)`` (hidden states stay ``(layers * dirs, batch, hidden)``).
        dropout: dropout on the outputs of every layer but the last, in training.
        bidirectional: a second pass from the last step to the first, outputs concatenated.
        proj_size: LSTM only: project ``h`` to this size (``weight_hr``).

    ``forward(input, hx=None)``: ``input`` ``(L, N, H_in)`` (``(N, L, H_in)`` with
    ``batch_first``), unbatched ``(L, H_in)``, or a ``PackedSequence``; ``hx`` the initial
    state(s) ``(num_layers * dirs, N, H_out)`` (zeros when None). Returns ``(output, h_n)``, or
    ``(output, (h_n, c_n))`` for LSTM; ``output`` is a ``PackedSequence`` for a packed input.

    Raises:
        ValueError: bad sizes, dropout outside [0, 1], or proj_size on a non-LSTM or >= hidden.
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None):
        super().__init__()
        if mode not in GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or \
                not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout option adds dropout after all but last recurrent layer, so "
                          f"non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        for name, v in (("hidden_size", hidden_size), ("num_layers", num_layers)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        dirs = 2 if bidirectional else 1
        gate_size = GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        kw = {"dtype": dtype or _dtype.get_default_dtype(), "device": device}
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(dirs):
                layer_in = input_size if layer == 0 else real_hidden * dirs
                suffix = "_reverse" if direction == 1 else ""
                shapes: list[tuple[str, tuple[int, ...]]] = [
                    ("weight_ih_l{}{}", (gate_size, layer_in)),
                    ("weight_hh_l{}{}", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih_l{}{}", (gate_size,)), ("bias_hh_l{}{}", (gate_size,))]
                if proj_size > 0:
                    shapes += [("weight_hr_l{}{}", (proj_size, hidden_size))]
                names = []
                for fmt, shape in shapes:
                    name = fmt.format(layer, suffix)
                    setattr(self, name, Parameter(empty(*shape, **kw)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) for every weight and bias (torch's)."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters per layer and direction: ``[[w_ih, w_hh, b_ih, b_hh(, w_hr)], ...]``."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """A no-op kept for torch programs (cuDNN's contiguous weight buffer does not apply)."""

    def _state_size(self):
        dirs = 2 if self.bidirectional else 1
        out = self.proj_size if self.proj_size > 0 else self.hidden_size
        return self.num_layers * dirs, out

    def _check_hidden(self, h, expected, what):
        if tuple(h.shape) != expected:
            raise RuntimeError(f"Expected {what} size {expected}, got {list(h.shape)}")

    def forward(self, input, hx=None):
        packed = isinstance(input, PackedSequence)
        if packed:
            data = input.data
            batch_sizes = to_numpy(input.batch_sizes._data).astype(np.int64).tolist()
            B = batch_sizes[0]
            batched = True
        else:
            if input.dim() not in (2, 3):
                raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                                 f"{input.dim()}D input of shape {tuple(input.shape)}")
            batched = input.dim() == 3
            x = input if batched else input.unsqueeze(1)
            if batched and self.batch_first:
                x = x.transpose(0, 1)
            T, B = x.shape[0], x.shape[1]
            data = x.reshape(T * B, x.shape[2])
            batch_sizes = [B] * T
        if data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {data.shape[-1]}")
        h0, c0 = self._initial_state(hx, data, B, batched, input if packed else None)
        out, hns, cns = self._run_layers(data, h0, c0, batch_sizes)
        h_n = _S.stack(hns, 0)
        c_n = _S.stack(cns, 0) if cns else None
        if packed:
            if input.unsorted_indices is not None:
                h_n = h_n.index_select(1, input.unsorted_indices)
                c_n = None if c_n is None else c_n.index_select(1, input.unsorted_indices)
            output = PackedSequence(out, input.batch_sizes, input.sorted_indices,
                                    input.unsorted_indices)
        else:
            output = out.reshape(T, B, out.shape[-1])
            if not batched:
                output = output.squeeze(1)
                h_n = h_n.squeeze(1)
                c_n = None if c_n is None else c_n.squeeze(1)
            elif self.batch_first:
                output = output.transpose(0, 1)
        return output, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def _initial_state(self, hx, data, B, batched, packed):
        """(h0 list, c0 list or None) per layer and direction, each ``(B, size)``."""
        n, out_size = self._state_size()
        lstm = self.mode == "LSTM"
        if hx is None:
            h = [_zeros_like_state(data, (B, out_size)) for _ in range(n)]
            c = [_zeros_like_state(data, (B, self.hidden_size)) for _ in range(n)] if lstm else None
            return h, c
        if lstm:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise RuntimeError("LSTM: hx must be a tuple (h_0, c_0)")
            states = [(hx[0], (n, B, out_size), "hidden"),
                      (hx[1], (n, B, self.hidden_size), "cell")]
        else:
            if not isinstance(hx, Tensor):
                raise RuntimeError(f"{type(self).__name__}: hx must be a Tensor, got "
                                   f"{type(hx).__name__}")
            states = [(hx, (n, B, out_size), "hidden")]
        res = []
        for h, shape, what in states:
            if not batched:
                if h.dim() != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got "
                                       f"{h.dim()}-D tensor")
                h = h.unsqueeze(1)
            elif h.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got "
                                   f"{h.dim()}-D tensor")
            if packed is not None and packed.sorted_indices is not None:
                h = h.index_select(1, packed.sorted_indices)
            self._check_hidden(h, shape, what)
            res.append([h[i] for i in range(n)])
        return res[0], (res[1] if lstm else None)

    def _run_layers(self, x, h0, c0, batch_sizes):
        dirs = 2 if self.bidirectional else 1
        hns, cns = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                hx = (h0[k], c0[k]) if c0 is not None else (h0[k],)
                weights = self._flat_weights_at(k)
                y, hn, cn = recurrent_layer(self.mode, x, hx, weights, batch_sizes, reverse=d == 1)
                outs.append(y)
                hns.append(hn)
                if cn is not None:
                    cns.append(cn)
            x = outs[0] if dirs == 1 else _S.cat(outs, 1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, hns, cns

    def _flat_weights_at(self, k):
        names = self._all_weights[k]
        ws = [getattr(self, n) for n in names]
        if not self.bias:
            ws = ws[:2] + [None, None] + ws[2:]
        return ws

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu).

    Args: as :class:`RNNBase`, plus ``nonlinearity`` ('tanh' or 'relu'); positional arguments
    follow torch: ``RNN(input_size, hidden_size, num_layers, nonlinearity, bias, batch_first,
    dropout, bidirectional)``.

    Returns from forward: ``(output, h_n)``.

    >>> import tensorbrain as tb
    >>> out, h = tb.nn.RNN(4, 8, nonlinearity="relu")(tb.randn(6, 2, 4))
    >>> out.shape, h.shape
    (tb.Size([6, 2, 8]), tb.Size([1, 2, 8]))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             f"'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s if self.nonlinearity == "tanh" else s + f", nonlinearity={self.nonlinearity}"


class LSTM(RNNBase):
    """Long short-term memory (torch's gate order i, f, g, o; ``proj_size`` supported).

    Returns from forward: ``(output, (h_n, c_n))``; ``hx`` is ``(h_0, c_0)`` or None (zeros).

    Args:
        input_size: the number of features of the input.
        hidden_size: the number of features of the hidden state.
        num_layers: the number of stacked layers.
        bias: learn ``bias_ih_l*`` and ``bias_hh_l*``.
        batch_first: input and output are ``(N, L, features)`` instead of ``(L, N, features)``.
        dropout: dropout on the outputs of every layer but the last.
        bidirectional: add a reverse-direction layer (``*_reverse`` parameters).
        proj_size: when > 0, project ``h`` to this size (``weight_hr_l*``).
        device: the device of the parameters.
        dtype: the dtype of the parameters; None for the default dtype.

    Raises:
        ValueError: bad sizes, dropout outside [0, 1], or ``proj_size >= hidden_size``.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    """Gated recurrent unit (torch's gate order r, z, n; ``b_hn`` inside the reset product).

    Returns from forward: ``(output, h_n)``.

    Args:
        input_size: the number of features of the input.
        hidden_size: the number of features of the hidden state.
        num_layers: the number of stacked layers.
        bias: learn ``bias_ih_l*`` and ``bias_hh_l*``.
        batch_first: input and output are ``(N, L, features)`` instead of ``(L, N, features)``.
        dropout: dropout on the outputs of every layer but the last.
        bidirectional: add a reverse-direction layer (``*_reverse`` parameters).
        device: the device of the parameters.
        dtype: the dtype of the parameters; None for the default dtype.

    Raises:
        ValueError: bad sizes or dropout outside [0, 1].
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)


# ***** cells *****
class RNNCellBase(Module):
    """One step of a recurrent layer: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``.

    Args:
        input_size: the number of features of the input.
        hidden_size: the number of features of the hidden state.
        bias: learn ``bias_ih`` and ``bias_hh``.
        num_chunks: the number of gates (1 for RNN, 3 for GRU, 4 for LSTM).
        device: the device of the parameters.
        dtype: the dtype of the parameters; None for the default dtype.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        kw = {"dtype": dtype or _dtype.get_default_dtype(), "device": device}
        self.weight_ih = Parameter(empty(num_chunks * hidden_size, input_size, **kw))
        self.weight_hh = Parameter(empty(num_chunks * hidden_size, hidden_size, **kw))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, **kw))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) for every weight and bias (torch's)."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _step(self, mode, input, states):
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.dim()}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} "
                               f"expected {self.input_size}")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        B = x.shape[0]
        hx = []
        for s, size in states:
            if s is None:
                s = _zeros_like_state(x, (B, size))
            elif not batched:
                s = s.unsqueeze(0)
            if tuple(s.shape) != (B, size):
                raise RuntimeError(f"{type(self).__name__}: hidden state has shape "
                                   f"{tuple(s.shape)}, expected {(B, size)}")
            hx.append(s)
        weights = (self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        y, _, c = recurrent_layer(mode, x, hx, weights, [B])
        if not batched:
            y = y.squeeze(0)
            c = None if c is None else c.squeeze(0)
        return y, c


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu).

    >>> import tensorbrain as tb
    >>> tb.nn.RNNCell(4, 8)(tb.randn(3, 4)).shape
    tb.Size([3, 8])

    Args:
        input_size: the number of features of the input.
        hidden_size: the number of features of the hidden state.
        bias: learn ``bias_ih`` and ``bias_hh``.
        nonlinearity: ``"tanh"`` or ``"relu"``.
        device: the device of the parameters.
        dtype: the dtype of the parameters; None for the default dtype.

    Raises:
        ValueError: another ``nonlinearity``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input, hx=None):
        mode = "RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU"
        return self._step(mode, input, [(hx, self.hidden_size)])[0]


class LSTMCell(RNNCellBase):
    """One LSTM step; ``forward(input, (h, c))`` returns ``(h', c')``.

    Args:
        input_size: the number of features of the input.
        hidden_size: the number of features of the hidden state.
        bias: learn ``bias_ih`` and ``bias_hh``.
        device: the device of the parameters.
        dtype: the dtype of the parameters; None for the default dtype.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        h, c = (None, None) if hx is None else hx
        return self._step("LSTM", input, [(h, self.hidden_size), (c, self.hidden_size)])


class GRUCell(RNNCellBase):
    """One GRU step; ``forward(input, h)`` returns ``h'``.

    Args:
        input_size: the number of features of the input.
        hidden_size: the number of features of the hidden state.
        bias: learn ``bias_ih`` and ``bias_hh``.
        device: the device of the parameters.
        dtype: the dtype of the parameters; None for the default dtype.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        return self._step("GRU", input, [(hx, self.hidden_size)])[0]
