"""The tutorial's single-process ``Pipe`` (``torch.distributed.pipeline.sync.Pipe``, GPipe).

torch removed ``torch.distributed.pipeline.sync`` in 2.4; its successor is
``torch.distributed.pipelining`` (here :mod:`tensorbrain.distributed.pipelining`), which runs
one stage per process. This module keeps the tutorial's code working: a ``nn.Sequential`` is cut
into partitions, each on its device, the batch into ``chunks`` micro-batches, and the forward runs
GPipe's clock schedule (at clock ``k`` partition ``j`` runs micro-batch ``k - j``) with one worker
thread per partition, so partitions overlap where kernels release the GIL (BLAS, CuPy).

Backward is ordinary autograd from the caller's thread through the concatenated output (torch's
Pipe pipelined the backward with per-device autograd threads; TensorBrain's engine is one
thread, so here the backward runs partition after partition). Activation checkpointing
(``checkpoint="except_last"``, the default) recomputes each micro-batch's activations during
backward except the last micro-batch's, which backward needs first.

``forward`` returns an RRef-like object (``local_value()``, ``to_here()``) as torch's does; torch
also required ``torch.distributed.rpc.init_rpc`` first, TensorBrain does not.

>>> import tensorbrain as tb
>>> from tensorbrain.distributed.pipeline.sync import Pipe
>>> net = tb.nn.Sequential(tb.nn.Linear(4, 8), tb.nn.ReLU(), tb.nn.Linear(8, 2))
>>> pipe = Pipe(net, chunks=2, balance=[2, 1], devices=["cpu", "cpu"])
>>> pipe(tb.randn(6, 4)).local_value().shape
tb.Size([6, 2])
"""
from __future__ import annotations

import queue
import threading

from ...nn import Module, Sequential

__all__ = ["Pipe", "PipeRRef"]

_CHECKPOINT_MODES = ("always", "except_last", "never")


class PipeRRef:
    """What :meth:`Pipe.forward` returns (torch returns an ``RRef``): the output lives here."""

    def __init__(self, value):
        self._value = value

    def local_value(self):
        """The output Tensor."""
        return self._value

    def to_here(self, timeout=None):
        """The output Tensor (it is already local).

        Args:
            timeout: ignored (the value is local).
        """
        return self._value


class _Worker:
    """One partition's thread: runs the tasks it is given, in order, and reports each result."""

    def __init__(self, name: str):
        self.tasks: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def _loop(self):
        from ...autograd import grad_mode
        while True:
            item = self.tasks.get()
            if item is None:
                return
            fn, grad_on, done = item
            grad_mode._set(grad_on)     # grad mode is thread-local: take the caller's
            try:
                done.put((True, fn()))
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                done.put((False, e))

    def close(self):
        self.tasks.put(None)


class Pipe(Module):
    """GPipe over an ``nn.Sequential`` in one process.

    Partitions come from ``balance`` (layers per partition) with ``devices`` (one per
    partition, moved there), or, as in torch 2.x, from where the layers' parameters already
    live (consecutive layers on one device form a partition).

    Args:
        module: an ``nn.Sequential``.
        chunks: micro-batches per batch (the input is split along dimension 0).
        checkpoint: ``"except_last"`` (default), ``"always"`` or ``"never"``.
        deferred_batch_norm: not supported (raises when True).
        balance: optional layers per partition, e.g. ``[2, 3]``.
        devices: optional device per partition (default: ``"cpu"`` for each).

    Raises:
        TypeError: ``module`` is not an ``nn.Sequential``.
        ValueError: bad ``chunks``, ``checkpoint``, ``balance`` or ``devices``.

    Example:
        >>> pipe = Pipe(net, chunks=8, balance=[2, 3], devices=["cuda:0", "cuda:1"])  # doctest: +SKIP
        >>> out = pipe(x).local_value()                                               # doctest: +SKIP
    """

    def __init__(self, module, chunks=1, checkpoint="except_last", deferred_batch_norm=False,
                 balance=None, devices=None):
        super().__init__()
        from ...distributed.pipelining import split_sequential
        if not isinstance(module, Sequential):
            raise TypeError(f"Pipe: module must be an nn.Sequential, got {type(module).__name__}")
        if int(chunks) < 1:
            raise ValueError(f"Pipe: chunks={chunks} must be a positive integer")
        if checkpoint not in _CHECKPOINT_MODES:
            raise ValueError(f"Pipe: checkpoint={checkpoint!r} must be one of {_CHECKPOINT_MODES}")
        if deferred_batch_norm:
            raise NotImplementedError("Pipe: deferred_batch_norm is not supported by TensorBrain")
        if balance is not None:
            parts = split_sequential(module, balance=balance)
            devices = list(devices) if devices is not None else ["cpu"] * len(parts)
            if len(devices) != len(parts):
                raise ValueError(f"Pipe: {len(parts)} partitions (balance={list(balance)}) but "
                                 f"{len(devices)} devices {devices}")
            for p, d in zip(parts, devices, strict=True):
                p.to(d)
        else:
            if devices is not None:
                raise ValueError("Pipe: devices= needs balance= (or place the layers on their "
                                 "devices before building the Pipe)")
            parts, devices = _by_device(module)
        self.chunks, self.checkpoint = int(chunks), checkpoint
        self.partitions = _Partitions(parts)
        self.devices = [str(d) for d in devices]
        self._workers = [_Worker(f"tb-pipe-{j}") for j in range(len(parts))]
        # Random layers draw from the one global generator: within a clock, partitions that
        # hold one run one after another in a fixed order, so the draws are reproducible and a
        # checkpoint's saved generator state is the one its draws start from (the
        # recomputation repeats them and gradients stay exact).
        self._random = [any("Dropout" in type(m).__name__ for m in p.modules()) for p in parts]

    def __len__(self):
        return sum(len(p) for p in self.partitions)

    def forward(self, input):
        """Run the batch through the pipeline; returns a :class:`PipeRRef` to the output."""
        from ... import cat
        from ...autograd import grad_mode
        from ...tensor import Tensor
        from ...utils.checkpoint import checkpoint as ckpt
        if not isinstance(input, Tensor):
            raise TypeError(f"Pipe: the input must be a Tensor, got {type(input).__name__}")
        n = input.shape[0]
        if n < self.chunks:
            raise ValueError(f"Pipe: the batch has {n} rows, fewer than chunks={self.chunks}")
        base, extra = divmod(n, self.chunks)
        sizes = [base + (1 if i < extra else 0) for i in range(self.chunks)]
        x = input.to(self.devices[0])
        acts, lo = [], 0
        for s in sizes:
            acts.append(x[lo:lo + s])
            lo += s
        M, S = len(acts), len(self.partitions)
        grad_on = grad_mode.is_grad_enabled()
        stop = {"always": M, "except_last": M - 1, "never": 0}[self.checkpoint]

        def task(i, j, after, mine):
            part, nxt = self.partitions[j], self.devices[j + 1] if j + 1 < S else None

            def run():
                if after is not None:
                    after.wait()         # the previous random partition of this clock is done
                try:
                    h = acts[i]
                    h = ckpt(part, h, use_reentrant=False) if (grad_on and i < stop) \
                        else part(h)
                    return h.to(nxt) if nxt is not None else h
                finally:
                    if mine is not None:
                        mine.set()
            return run
        for clock in range(M + S - 1):
            live = [(i, clock - i) for i in range(M) if 0 <= clock - i < S]
            done, prev = [], None
            for i, j in live:
                mine = threading.Event() if self._random[j] else None
                fn = task(i, j, prev if mine is not None else None, mine)
                prev = mine if mine is not None else prev
                q: queue.Queue = queue.Queue()
                self._workers[j].tasks.put((fn, grad_on, q))
                done.append((i, j, q))
            for i, j, q in done:
                ok, value = q.get()
                if not ok:
                    raise RuntimeError(f"Pipe: partition {j} on {self.devices[j]} failed on "
                                       f"micro-batch {i}: {type(value).__name__}: {value}") \
                        from value
                acts[i] = value
        return PipeRRef(cat(acts, 0))

    def __del__(self):
        for w in getattr(self, "_workers", ()):
            w.close()


class _Partitions(Module):
    """The partitions as registered children (so ``parameters()`` and ``state_dict`` see them,
    under torch's names ``partitions.0``, ``partitions.1``...)."""

    def __init__(self, parts):
        super().__init__()
        for j, p in enumerate(parts):
            self.add_module(str(j), p)
        self._list = list(parts)

    def __getitem__(self, j):
        return self._list[j]

    def __len__(self):
        return len(self._list)

    def __iter__(self):
        return iter(self._list)


def _by_device(module):
    """Consecutive layers whose parameters share a device form one partition."""
    parts: list = []
    devices: list = []
    for name, layer in module.named_children():
        devs = {str(p.device) for p in layer.parameters()}
        if len(devs) > 1:
            raise ValueError(f"Pipe: layer {name!r} has parameters on several devices {devs}")
        dev = devs.pop() if devs else (devices[-1] if devices else "cpu")
        if not devices or devices[-1] != dev:
            parts.append(Sequential())
            devices.append(dev)
        parts[-1].add_module(name, layer)
    return parts, devices
