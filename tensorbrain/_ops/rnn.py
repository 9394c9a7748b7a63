"""Fused recurrent layers: one graph node per layer and direction, whose backward runs the time
loop itself.

Why: a recurrent layer written from primitive ops records ~15 graph nodes per timestep and pays
Python dispatch for each, forward and backward (1.7-2.0x torch's step time on LSTM language
models; docs/sequence.md has the figures). Here a layer/direction costs

* one GEMM for the input projections of all timesteps (``x @ W_ih^T + b``); for an LSTM whose
  batch is the same at every step on the native path, ``lstm_seq_forward`` then writes each
  step's gates from it (bias, gate order and scale applied there: no copy into blocks);
* per timestep: one GEMM with ``W_hh`` and the gate math: for the LSTM one native call each way
  (``lstm_step_forward``/``lstm_step_backward``, csrc/kernels/lstm.cpp, float32: the GEMM on a
  ``W_hh`` packed once per layer call by ``PackedMatrix``, csrc/kernels/gemm.h, then the cell) or
  its NumPy twins of the same names; for the GRU and plain RNN a handful of in-place NumPy calls (the
  GRU's gate-gradient coefficients for all timesteps at once, vectorised);
* in backward, per timestep the gate math and one GEMM, then one GEMM each for ``dW_ih``,
  ``dW_hh`` and ``dx``.

Rows are laid out flat: step ``t`` owns rows ``[offset_t, offset_t + batch_sizes[t])`` of the
``(N, features)`` input, exactly the layout of ``PackedSequence.data``. An unpacked ``(T, B, I)``
input is the special case of ``T`` steps of ``B`` rows, so packed and padded inputs share one
kernel. Sequences are sorted by decreasing length, so a forward pass's active rows shrink and a
reverse pass's grow; rows that are not active keep their state.

The LSTM keeps its gates internally in the order (o, i, f, g), torch's being (i, f, g, o): the
three sigmoid gates are then one contiguous block for the forward. The backward writes the gate
gradients in torch's order, so that the weight gradients, ``dx`` and the recurrent product take
the weights and give their gradients as they are, with no permuted copy. Each step's gates are stored
as one contiguous ``(4, bs, H)`` block, which the hidden GEMM writes gate by gate: ufuncs on
contiguous blocks beat the strided column slices of a ``(bs, 4H)`` array (docs/sequence.md). Sigmoids are computed as ``0.5 * tanh(x / 2) + 0.5`` with
the 1/2 folded into a per-call copy of the weights (one ufunc per step instead of four).

The layer returns ``y``; ``h_n`` (and ``c_n``) are tensors whose nodes hand their gradient to
the layer's node through a shared cell and give ``y`` a zero gradient, so the three outputs
cost one node between them (the engine runs them before the layer's node: they depend on it).
"""
from __future__ import annotations

import numpy as np

from .. import _gemm, _native
from .._xp import get_array_module
from .._tensor_base import TensorBase as Tensor
from .core import make, sum_axes
from .packed_gemm import PackedMatrix, gemm_packed

GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _steps(batch_sizes, reverse):
    """(first row, rows) of every step, in processing order."""
    out, off = [], 0
    for bs in batch_sizes:
        out.append((off, int(bs)))
        off += int(bs)
    return out[::-1] if reverse else out


def _prev_rows(xp, out, h0, step, prev, first):
    """The state entering ``step``: the previous step's rows of ``out``, and ``h0``'s rows for
    sequences that start here (a reverse pass over packed data grows its batch)."""
    off, bs = step
    if first:
        return h0[:bs]
    poff, pbs = prev
    if bs <= pbs:
        return out[poff:poff + bs]
    return xp.concatenate([out[poff:poff + pbs], h0[pbs:bs]])


def _final_rows(xp, out, steps, shape):
    """Each sequence's last state: rows leave the batch when a step has fewer rows than the one
    before it, and all remaining rows leave at the last step."""
    fin = xp.empty(shape, dtype=out.dtype)
    for k, (off, bs) in enumerate(steps):
        nxt = steps[k + 1][1] if k + 1 < len(steps) else 0
        if nxt < bs:
            fin[nxt:bs] = out[off + nxt:off + bs]
    return fin


def _in_row_order(xp, parts, steps, reverse):
    """Per-step arrays (processing order) concatenated in row order."""
    if reverse:
        parts = parts[::-1]
    return xp.concatenate(parts) if len(parts) > 1 else parts[0]


def side_output(value, y, cell, key):
    """``h_n``/``c_n``: its gradient goes to ``cell[key]``; ``y`` gets a (broadcast) zero."""
    if not y.requires_grad:
        return Tensor._wrap(value)
    xp = get_array_module(value)
    zero = xp.zeros((), dtype=y._data.dtype)

    def backward(g):
        cell[key] = g
        return (xp.broadcast_to(zero, y._data.shape),)
    return make(value, (y,), backward, "RnnStateBackward")


def remember_output(cell, t, name):
    """Record ``t``'s version: the node's backward reads ``t``'s array (kept without a reference
    to ``t``, so no cycle) and must refuse it after an in-place change, as torch does."""
    if t is not None:
        cell["saved"] = cell.get("saved", ()) + ((t._version, t._version[0], name),)


def check_outputs(cell):
    for ver, v0, name in cell.get("saved", ()):
        if ver[0] != v0:
            raise RuntimeError(f"one of the variables needed for gradient computation has been "
                               f"modified by an inplace operation: the output of {name} is at "
                               f"version {ver[0]}; expected version {v0} instead. Clone the "
                               f"output before changing it in place.")


# ***** LSTM *****
def lstm_cell_forward(gates, rec, c_prev, c, tc, h):
    """One step's elementwise part, in place: ``gates`` ``(4, B, H)`` (o, i, f, g, the sigmoid
    ones pre-scaled by 1/2) ``+= rec`` and activated; ``c = f * c_prev + i * g``, ``tc =
    tanh(c)``, ``h = o * tc``. The NumPy twin of ``tensorbrain._C.lstm_cell_forward``."""
    xp = get_array_module(gates)
    gates += rec
    xp.tanh(gates, out=gates)
    s = gates[:3]
    s *= 0.5
    s += 0.5                                        # o, i, f sigmoids; g stays tanh
    xp.multiply(gates[2], c_prev, out=c)
    c += gates[1] * gates[3]
    xp.tanh(c, out=tc)
    xp.multiply(gates[0], tc, out=h)


def lstm_cell_backward(dh, dc, gy, gates, tc, c_prev, dgates):
    """One step back, in place, from the step's activated ``gates`` ``(4, B, H)`` (o, i, f, g),
    ``tc = tanh(c)`` and ``c_prev``: ``dh += gy``, ``dc += dh * o * (1 - tc^2)``, the gradients
    of torch's pre-activations into ``dgates`` ``(B, 4H)`` in torch's order (i, f, g, o), then
    ``dc *= f``. The NumPy twin of ``tensorbrain._C.lstm_cell_backward``."""
    xp = get_array_module(dh)
    o, i, f, g = gates
    dh += gy
    dc += dh * (o * (1 - tc * tc))
    dg = dgates.reshape(dh.shape[0], 4, -1)
    xp.multiply(dc, g * i * (1 - i), out=dg[:, 0])
    xp.multiply(dc, c_prev * f * (1 - f), out=dg[:, 1])
    xp.multiply(dc, i * (1 - g * g), out=dg[:, 2])
    xp.multiply(dh, tc * o * (1 - o), out=dg[:, 3])
    dc *= f


def lstm_step_forward(w, h_prev, gates, c_prev, c, tc, h):
    """A whole forward step: ``gates (4, B, H) += h_prev @ W`` (``w``: a
    :class:`~tensorbrain._ops.packed_gemm.PackedMatrix` of the scaled, permuted ``W_hh^T`` in 4
    groups), then :func:`lstm_cell_forward`. The NumPy twin of
    ``tensorbrain._C.lstm_step_forward``."""
    xp = get_array_module(gates)
    lstm_cell_forward(gates, xp.matmul(h_prev[None], w.blocks), c_prev, c, tc, h)


def lstm_step_backward(w, dh, dc, gy, gates, tc, c_prev, dgates, dh_out):
    """A whole backward step: :func:`lstm_cell_backward`, then ``dh_out = dgates @ W_hh``
    (``w`` packed from the permuted ``W_hh`` in one group; ``dh_out`` may be ``dh``). The NumPy
    twin of ``tensorbrain._C.lstm_step_backward``."""
    lstm_cell_backward(dh, dc, gy, gates, tc, c_prev, dgates)
    gemm_packed(dgates, w, dh_out)


def lstm_seq_forward(w, h0, c0, gates, y, c, tc, reverse, proj=None, bias=None):
    """Every step of a layer forward for a batch that is the same at every step (``y``, ``c``,
    ``tc``: ``(steps * B, H)``; ``gates``: the steps' ``(4, B, H)`` blocks, flat), in processing
    order: :func:`lstm_step_forward` per step. With ``proj`` (``(steps * B, 4H)``, ``x @
    W_ih^T``) and/or ``bias`` (``(4H,)``), both in torch's gate order and unscaled, each step's
    gates are first written from them in the cell's order and scale (``_GATE_ORDER``,
    ``_GATE_SCALE``). The NumPy twin of ``tensorbrain._C.lstm_seq_forward``."""
    B, H = h0.shape
    T = y.shape[0] // B if B else 0
    xp = get_array_module(gates)
    prev = None
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        rows = slice(t * B, (t + 1) * B)
        hp, cp = (h0, c0) if prev is None else (y[prev], c[prev])
        g = gates[4 * H * t * B:4 * H * (t + 1) * B].reshape(4, B, H)
        if proj is not None or bias is not None:
            p = (proj[rows] if proj is not None else xp.zeros((B, 4 * H), dtype=g.dtype)).reshape(B, 4, H)
            if bias is not None:
                p = p + bias.reshape(4, H)
            for q, (src, s) in enumerate(zip(_GATE_ORDER, _GATE_SCALE)):
                xp.multiply(p[:, src], s, out=g[q])
        lstm_step_forward(w, hp, g, cp, c[rows], tc[rows], y[rows])
        prev = rows


def lstm_seq_backward(w, dh, dc, gy, gates, tc, c0, c, dgates, reverse):
    """Every step of a layer back (the forward of :func:`lstm_seq_forward`), in reverse
    processing order: :func:`lstm_step_backward` per step, ``dh`` and ``dc`` carried in place,
    ``dgates`` ``(steps * B, 4H)`` written. The NumPy twin of
    ``tensorbrain._C.lstm_seq_backward``."""
    B, H = dh.shape
    T = gy.shape[0] // B if B else 0
    order = list(range(T - 1, -1, -1) if reverse else range(T))
    for k in range(T - 1, -1, -1):
        t = order[k]
        rows = slice(t * B, (t + 1) * B)
        cp = c0 if k == 0 else c[order[k - 1] * B:(order[k - 1] + 1) * B]
        lstm_step_backward(w, dh, dc, gy[rows], gates[4 * H * t * B:4 * H * (t + 1) * B]
                           .reshape(4, B, H), tc[rows], cp, dgates[rows], dh)


def _cell_module(x):
    """The C++ module for the fused cell (float32 NumPy only), or None for the twins."""
    if type(x) is not np.ndarray or x.dtype != np.float32 or not _NATIVE_CELL:
        return None
    return _native.loaded()


class _Twins:
    """The NumPy twins under the native module's names."""
    PackedMatrix = PackedMatrix
    lstm_step_forward = staticmethod(lstm_step_forward)
    lstm_step_backward = staticmethod(lstm_step_backward)
    lstm_seq_forward = staticmethod(lstm_seq_forward)
    lstm_seq_backward = staticmethod(lstm_seq_backward)


_NATIVE_CELL = True   # tests switch the native cell off to run the twins


# The native cell's gate blocks: torch's (i, f, g, o) taken as (o, i, f, g), the three sigmoid
# gates' rows halved (sigmoid(x) = (1 + tanh(x / 2)) / 2)
_GATE_ORDER, _GATE_SCALE = (3, 0, 1, 2), (0.5, 0.5, 0.5, 1.0)


def _lstm_perm(xp, H):
    """Row index that takes torch's (i, f, g, o) gate blocks to (o, i, f, g)."""
    r = np.arange(H)
    return xp.asarray(np.concatenate([r + g * H for g in _GATE_ORDER]))


def _to_blocks(xp, rows, steps, uniform):
    """``(N, G, H)`` rows -> flat array in which each step's rows form one contiguous
    ``(G, bs, H)`` block (at offset ``G * H * first_row``): a step's gates are then contiguous
    arrays, which NumPy runs ~3x faster than the strided column slices of ``(bs, G*H)``."""
    N, G, H = rows.shape
    if uniform:
        T = len(steps)
        return xp.ascontiguousarray(rows.reshape(T, N // T, G, H).transpose(0, 2, 1, 3)).reshape(-1)
    out = xp.empty(N * G * H, dtype=rows.dtype)
    for off, bs in steps:
        out[G * H * off:G * H * (off + bs)].reshape(G, bs, H)[...] = \
            rows[off:off + bs].transpose(1, 0, 2)
    return out


def _to_rows(xp, blocks, N, G, H, steps, uniform):
    """The inverse of :func:`_to_blocks`: ``(N, G, H)``."""
    if uniform:
        T = len(steps)
        return xp.ascontiguousarray(blocks.reshape(T, G, N // T, H).transpose(0, 2, 1, 3)) \
            .reshape(N, G, H)
    out = xp.empty((N, G, H), dtype=blocks.dtype)
    for off, bs in steps:
        out[off:off + bs] = blocks[G * H * off:G * H * (off + bs)].reshape(G, bs, H) \
            .transpose(1, 0, 2)
    return out


def _lstm(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, batch_sizes, reverse):
    X, Wih, Whh = x._data, w_ih._data, w_hh._data
    xp = get_array_module(X)
    dt = X.dtype
    H4, Hout = Whh.shape
    H = H4 // 4
    N = X.shape[0]
    B = int(batch_sizes[0]) if len(batch_sizes) else 0
    uniform = all(int(bs) == B for bs in batch_sizes)
    steps = _steps(batch_sizes, reverse)
    row_steps = steps[::-1] if reverse else steps
    native = _cell_module(X)
    ops = _Twins if native is None else native
    # a batch the same at every step and no projection: the whole sequence in one call; the
    # native one also writes each step's gates from the input products (lstm_seq_forward),
    # saving the reordering copy into blocks that NumPy and CuPy make below
    whole = uniform and w_hr is None and B > 0
    inline = whole and native is not None
    if inline:
        Gb = xp.empty(N * H4, dtype=dt)
    else:
        idx = _lstm_perm(xp, H)
        scale = xp.asarray(np.repeat(np.array(_GATE_SCALE, dtype=dt), H)[:, None])   # per permuted row
        bias = None if b_ih is None else (b_ih._data + b_hh._data)[idx] * scale[:, 0]
        P = X @ (Wih[idx] * scale).T                    # (N, 4H): all input projections
        if bias is not None:
            P += bias
        Gb = _to_blocks(xp, P.reshape(N, 4, H), row_steps, uniform)    # per step (4, bs, H)
        del P
    # W_hh packed once for the per-step products into the (4, bs, H) gate blocks, its gate
    # blocks reordered and scaled as it is packed (no permuted copy first)
    Wf = ops.PackedMatrix(Whh.T, 4, _GATE_ORDER, _GATE_SCALE)
    WhrT = None if w_hr is None else xp.ascontiguousarray(w_hr._data.T)
    Y = xp.empty((N, Hout), dtype=dt)
    C = xp.empty((N, H), dtype=dt)
    TC = xp.empty((N, H), dtype=dt)
    HR = None if w_hr is None else xp.empty((N, H), dtype=dt)
    H0, C0 = h0._data, c0._data
    if native is not None:                 # the kernel reads contiguous states
        H0, C0 = np.ascontiguousarray(H0), np.ascontiguousarray(C0)
    hprevs, cprevs = [], []
    if inline:                             # all steps' input products in one BLAS GEMM
        ops.lstm_seq_forward(Wf, H0, C0, Gb, Y, C, TC, reverse, _gemm.mm(X, Wih.T),
                             None if b_ih is None else b_ih._data + b_hh._data)
    elif whole:
        ops.lstm_seq_forward(Wf, H0, C0, Gb, Y, C, TC, reverse)
    prev = None
    for k, step in enumerate([] if whole else steps):
        off, bs = step
        rows = slice(off, off + bs)
        hp = _prev_rows(xp, Y, H0, step, prev, k == 0)
        cp = _prev_rows(xp, C, C0, step, prev, k == 0)
        hprevs.append(hp)
        cprevs.append(cp)
        prev = step
        Gt = Gb[4 * H * off:4 * H * (off + bs)].reshape(4, bs, H)
        ops.lstm_step_forward(Wf, hp, Gt, cp, C[rows], TC[rows], Y[rows] if WhrT is None else HR[rows])
        if WhrT is not None:
            xp.matmul(HR[rows], WhrT, out=Y[rows])
    h_n = _final_rows(xp, Y, steps, (B, Hout))
    c_n = _final_rows(xp, C, steps, (B, H))
    cell: dict = {}

    def backward(gY):
        check_outputs(cell)
        gh, gc = cell.pop("h", None), cell.pop("c", None)
        dh = xp.zeros((B, Hout), dtype=dt) if gh is None else gh.astype(dt, copy=True)
        dc = xp.zeros((B, H), dtype=dt) if gc is None else gc.astype(dt, copy=True)
        # each step's entering state: the step processed before it, h0 for the first. A zero h0
        # (no state given) adds nothing to dW_hh: its rows are left out instead of copied in.
        skip_h0 = whole and N > B and not H0.any()
        if skip_h0:
            Hprev = Y[B:] if reverse else Y[:N - B]
        elif whole:
            Hprev = xp.concatenate([Y[B:], H0]) if reverse else xp.concatenate([H0, Y[:N - B]])
        else:
            Hprev = _in_row_order(xp, hprevs, steps, reverse)
        dG2 = xp.empty((N, H4), dtype=dt)                 # gate gradients, torch's (i, f, g, o)
        DYT = None if WhrT is None else xp.empty((N, Hout), dtype=dt)
        Whr = None if w_hr is None else w_hr._data
        Wb = ops.PackedMatrix(Whh, 1)                    # for dh = dgates @ W_hh, every step
        gy = xp.ascontiguousarray(gY, dtype=dt)          # a broadcast zero when only h_n is used
        zero = None if Whr is None else xp.zeros((B, H), dtype=dt)
        if whole:
            ops.lstm_seq_backward(Wb, dh, dc, gy, Gb, TC, C0, C, dG2, reverse)
        else:
            for (off, bs), cprev in zip(reversed(steps), reversed(cprevs)):
                rows = slice(off, off + bs)
                blk = slice(H4 * off, H4 * (off + bs))
                dhb, dcb, dGt = dh[:bs], dc[:bs], dG2[rows]
                if Whr is None:
                    dhr, gyt = dhb, gy[rows]
                else:                                         # the gates see h = W_hr hr
                    dhb += gy[rows]
                    DYT[rows] = dhb
                    dhr, gyt = dhb @ Whr, zero[:bs]
                ops.lstm_step_backward(Wb, dhr, dcb, gyt, Gb[blk].reshape(4, bs, H), TC[rows], cprev, dGt, dhb)
        gWih = _gemm.mm(dG2.T, X)
        gWhh = _gemm.mm(((dG2[:N - B] if reverse else dG2[B:]) if skip_h0 else dG2).T, Hprev)
        gx = _gemm.mm(dG2, Wih)
        gb = None if b_ih is None else sum_axes(dG2, (0,))
        gWhr = None if Whr is None else DYT.T @ HR
        return gx, dh, dc, gWih, gWhh, gb, gb, gWhr

    y = make(Y, (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr), backward, "LstmBackward",
             tuple(t for t in (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr) if t is not None))
    remember_output(cell, y, "LSTM")
    return y, side_output(h_n, y, cell, "h"), side_output(c_n, y, cell, "c")


# ***** GRU *****
def _gru(x, h0, w_ih, w_hh, b_ih, b_hh, batch_sizes, reverse):
    X, Wih, Whh = x._data, w_ih._data, w_hh._data
    xp = get_array_module(X)
    dt = X.dtype
    H3, H = Whh.shape
    N = X.shape[0]
    B = int(batch_sizes[0]) if len(batch_sizes) else 0
    uniform = all(int(bs) == B for bs in batch_sizes)
    scale = xp.ones((H3, 1), dtype=dt)
    scale[:2 * H] = 0.5                                 # r, z: sigmoid via tanh
    Gi = X @ (Wih * scale).T                            # (N, 3H) r, z, n input parts
    bhn = None
    if b_ih is not None:
        bi = b_ih._data.copy()
        bi[:2 * H] += b_hh._data[:2 * H]                 # r and z biases fold into one
        Gi += bi * scale[:, 0]
        bhn = b_hh._data[2 * H:]
    steps = _steps(batch_sizes, reverse)
    row_steps = steps[::-1] if reverse else steps
    Gb = _to_blocks(xp, Gi.reshape(N, 3, H), row_steps, uniform)   # per step (3, bs, H)
    del Gi
    W3T = xp.ascontiguousarray((Whh * scale).reshape(3, H, H).transpose(0, 2, 1))
    GHb = xp.empty(N * H3, dtype=dt)                    # W_hh h (+ b_hn), per step (3, bs, H)
    Y = xp.empty((N, H), dtype=dt)
    H0 = h0._data
    tmp = xp.empty((B, H), dtype=dt)
    hprevs = []
    prev = None
    for k, step in enumerate(steps):
        off, bs = step
        rows = slice(off, off + bs)
        blk = slice(H3 * off, H3 * (off + bs))
        hp = _prev_rows(xp, Y, H0, step, prev, k == 0)
        hprevs.append(hp)
        gh = GHb[blk].reshape(3, bs, H)
        xp.matmul(hp[None], W3T, out=gh)
        if bhn is not None:
            gh[2] += bhn
        g = Gb[blk].reshape(3, bs, H)
        rz = g[:2]
        rz += gh[:2]
        xp.tanh(rz, out=rz)
        rz *= 0.5
        rz += 0.5
        n, t = g[2], tmp[:bs]
        xp.multiply(g[0], gh[2], out=t)
        n += t
        xp.tanh(n, out=n)
        yt = Y[rows]
        xp.subtract(hp, n, out=yt)
        yt *= g[1]
        yt += n                                          # h = n + z * (h_prev - n)
        prev = step
    h_n = _final_rows(xp, Y, steps, (B, H))
    cell: dict = {}

    def backward(gY):
        check_outputs(cell)
        gh0 = cell.pop("h", None)
        dh = xp.zeros((B, H), dtype=dt) if gh0 is None else gh0.astype(dt, copy=True)
        Hprev = _in_row_order(xp, hprevs, steps, reverse)
        if uniform:
            T = len(steps)
            A, GA = Gb.reshape(T, 3, B, H), GHb.reshape(T, 3, B, H)
            hprev = Hprev.reshape(T, B, H)
        else:
            A = _to_rows(xp, Gb, N, 3, H, row_steps, False)
            GA = _to_rows(xp, GHb, N, 3, H, row_steps, False)
            hprev = Hprev
        r, z, n, hn = A[:, 0], A[:, 1], A[:, 2], GA[:, 2]
        Kn = (1 - z) * (1 - n * n)
        Ki = xp.empty(A.shape, dtype=dt)                 # d(input parts) = dh * Ki
        xp.multiply(Kn * hn, r * (1 - r), out=Ki[:, 0])
        xp.multiply(hprev - n, z * (1 - z), out=Ki[:, 1])
        Ki[:, 2] = Kn
        Kh = Ki.copy()                                   # d(hidden parts) = dh * Kh
        Kh[:, 2] *= r
        if uniform:
            Kib, Khb = Ki.reshape(-1), Kh.reshape(-1)
        else:
            Kib, Khb = _to_blocks(xp, Ki, row_steps, False), _to_blocks(xp, Kh, row_steps, False)
        dGib = xp.empty(N * H3, dtype=dt)
        dGhb = xp.empty(N * H3, dtype=dt)
        Whh3 = Whh.reshape(3, H, H)
        t3b = xp.empty(H3 * B, dtype=dt)
        tmpb = xp.empty((B, H), dtype=dt)
        for off, bs in reversed(steps):
            rows = slice(off, off + bs)
            blk = slice(H3 * off, H3 * (off + bs))
            dhb, t = dh[:bs], tmpb[:bs]
            dhb += gY[rows]
            db3 = dhb[None]
            dgh = dGhb[blk].reshape(3, bs, H)
            xp.multiply(db3, Kib[blk].reshape(3, bs, H), out=dGib[blk].reshape(3, bs, H))
            xp.multiply(db3, Khb[blk].reshape(3, bs, H), out=dgh)
            t3 = t3b[:H3 * bs].reshape(3, bs, H)
            xp.matmul(dgh, Whh3, out=t3)
            xp.sum(t3, axis=0, out=t)
            dhb *= Gb[blk].reshape(3, bs, H)[1]          # z
            dhb += t
        dGi2 = _to_rows(xp, dGib, N, 3, H, row_steps, uniform).reshape(N, H3)
        dGh2 = _to_rows(xp, dGhb, N, 3, H, row_steps, uniform).reshape(N, H3)
        gWih = dGi2.T @ X
        gWhh = dGh2.T @ Hprev
        gx = dGi2 @ Wih
        gbi = gbh = None
        if b_ih is not None:
            gbi, gbh = sum_axes(dGi2, (0,)), sum_axes(dGh2, (0,))
        return gx, dh, gWih, gWhh, gbi, gbh

    y = make(Y, (x, h0, w_ih, w_hh, b_ih, b_hh), backward, "GruBackward",
             tuple(t for t in (x, h0, w_ih, w_hh, b_ih, b_hh) if t is not None))
    remember_output(cell, y, "the recurrent layer")
    return y, side_output(h_n, y, cell, "h"), None


# ***** Elman RNN (tanh / relu) *****
def _rnn(x, h0, w_ih, w_hh, b_ih, b_hh, batch_sizes, reverse, relu):
    X, Wih, Whh = x._data, w_ih._data, w_hh._data
    xp = get_array_module(X)
    dt = X.dtype
    H = Whh.shape[0]
    B = int(batch_sizes[0]) if len(batch_sizes) else 0
    P = X @ Wih.T
    if b_ih is not None:
        P += b_ih._data + b_hh._data
    WhhT = xp.ascontiguousarray(Whh.T)
    Y = xp.empty_like(P)
    H0 = h0._data
    tmp = xp.empty((B, H), dtype=dt)
    steps = _steps(batch_sizes, reverse)
    hprevs = []
    prev = None
    for k, step in enumerate(steps):
        off, bs = step
        rows = slice(off, off + bs)
        hp = _prev_rows(xp, Y, H0, step, prev, k == 0)
        hprevs.append(hp)
        t = tmp[:bs]
        xp.matmul(hp, WhhT, out=t)
        t += P[rows]
        if relu:
            xp.maximum(t, 0, out=Y[rows])
        else:
            xp.tanh(t, out=Y[rows])
        prev = step
    h_n = _final_rows(xp, Y, steps, (B, H))
    cell: dict = {}

    def backward(gY):
        check_outputs(cell)
        gh0 = cell.pop("h", None)
        dh = xp.zeros((B, H), dtype=dt) if gh0 is None else gh0.astype(dt, copy=True)
        K = (Y > 0).astype(dt) if relu else 1 - Y * Y
        dP = xp.empty_like(Y)
        for off, bs in reversed(steps):
            rows = slice(off, off + bs)
            dhb = dh[:bs]
            dhb += gY[rows]
            xp.multiply(dhb, K[rows], out=dP[rows])
            xp.matmul(dP[rows], Whh, out=dhb)
        Hprev = _in_row_order(xp, hprevs, steps, reverse)
        gb = sum_axes(dP, (0,)) if b_ih is not None else None
        return dP @ Wih, dh, dP.T @ X, dP.T @ Hprev, gb, gb

    y = make(Y, (x, h0, w_ih, w_hh, b_ih, b_hh), backward,
             "RnnReluBackward" if relu else "RnnTanhBackward",
             tuple(t for t in (x, h0, w_ih, w_hh, b_ih, b_hh) if t is not None))
    remember_output(cell, y, "the recurrent layer")
    return y, side_output(h_n, y, cell, "h"), None


def recurrent_layer(mode, x, hx, weights, batch_sizes, reverse=False):
    """One layer, one direction, as one graph node.

    Args:
        mode: "LSTM", "GRU", "RNN_TANH" or "RNN_RELU".
        x: Tensor ``(N, input_size)``; step ``t`` owns ``batch_sizes[t]`` consecutive rows.
        hx: ``(h0,)`` or, for LSTM, ``(h0, c0)``: Tensors ``(batch_sizes[0], hidden)``.
        weights: ``(w_ih, w_hh, b_ih, b_hh[, w_hr])`` in torch's layout; biases may be None.
        batch_sizes: non-increasing ints; all equal for an unpacked input.
        reverse: run from the last step to the first.

    Returns:
        ``(y (N, out), h_n, c_n or None)``.
    """
    w_ih, w_hh, b_ih, b_hh = weights[:4]
    if mode == "LSTM":
        w_hr = weights[4] if len(weights) > 4 else None
        return _lstm(x, hx[0], hx[1], w_ih, w_hh, b_ih, b_hh, w_hr, batch_sizes, reverse)
    if mode == "GRU":
        return _gru(x, hx[0], w_ih, w_hh, b_ih, b_hh, batch_sizes, reverse)
    if mode in ("RNN_TANH", "RNN_RELU"):
        return _rnn(x, hx[0], w_ih, w_hh, b_ih, b_hh, batch_sizes, reverse, mode == "RNN_RELU")
    raise ValueError(f"Unknown recurrent mode {mode!r}: expected LSTM, GRU, RNN_TANH or RNN_RELU")

