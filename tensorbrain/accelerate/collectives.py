"""``Accelerator``'s collectives: gather, gather_for_metrics, reduce, pad_across_processes."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .accelerator import GradientState


def _dist():
    from .. import distributed
    return distributed


class CollectivesMixin:
    """The collective methods of :class:`~tensorbrain.accelerate.Accelerator`.

    Requires of the class it is mixed into: ``num_processes`` and ``gradient_state``.
    """

    num_processes: int
    gradient_state: GradientState

    # ---- collectives ----------------------------------------------------------------------
    def gather(self, tensor):
        """All-gather ``tensor`` (or a nested list/tuple/dict of them), concatenated on dim 0.

        Args:
            tensor: a tensor (0-d tensors become one element each) or a nested structure.

        Returns:
            The same structure with every process's tensors concatenated in rank order.
        """
        return _recurse(tensor, self._gather_one)

    def _gather_one(self, t):
        import tensorbrain as tb
        if self.num_processes == 1:
            return t
        one = t.reshape(1) if t.dim() == 0 else t
        parts = [tb.empty_like(one) for _ in range(self.num_processes)]
        _dist().all_gather(parts, one.contiguous())
        return tb.cat(parts, dim=0)

    def gather_for_metrics(self, input_data, use_gather_object: bool = False):
        """:meth:`gather`, then drop the samples ``even_batches`` duplicated in the last batch.

        Args:
            input_data: tensors (or a nested structure) from this process's batch; other
                objects are gathered as objects.
            use_gather_object: gather as objects (lists are concatenated).

        Returns:
            The gathered data, without the repeated samples at the end of the data set.
        """
        if use_gather_object or not _has_tensor(input_data):
            objs = [None] * self.num_processes
            if self.num_processes > 1:
                _dist().all_gather_object(objs, input_data)
            else:
                objs = [input_data]
            data = [x for o in objs for x in (o if isinstance(o, (list, tuple)) else [o])]
        else:
            data = self.gather(input_data)
        state = self.gradient_state
        if state.end_of_dataloader and state.remainder > 0:
            return _recurse(data, lambda t: t[:state.remainder]) if not isinstance(data, list) \
                else data[:state.remainder]
        return data

    def reduce(self, tensor, reduction: str = "sum", scale: float = 1.0):
        """All-reduce ``tensor`` (or a nested structure).

        Args:
            tensor: a tensor or nested structure (not modified).
            reduction: "sum", "mean" or "none".
            scale: multiply the result by it.

        Returns:
            The reduced copy.

        Raises:
            ValueError: an unknown ``reduction``.
        """
        if reduction not in ("sum", "mean", "none"):
            raise ValueError(f"reduction must be 'sum', 'mean' or 'none', got {reduction!r}")

        def one(t):
            out = t.clone()
            if self.num_processes > 1 and reduction != "none":
                _dist().all_reduce(out)
                if reduction == "mean":
                    out = out / self.num_processes
            return out * scale if scale != 1.0 else out
        return _recurse(tensor, one)

    def pad_across_processes(self, tensor, dim: int = 0, pad_index=0, pad_first: bool = False):
        """Pad ``tensor`` along ``dim`` to the largest size any process has (so it gathers).

        Args:
            tensor: a tensor or nested structure.
            dim: the dimension to pad.
            pad_index: the fill value.
            pad_first: pad at the start instead of the end.

        Returns:
            The padded tensor(s).
        """
        import tensorbrain as tb

        def one(t):
            size = tb.tensor([t.shape[dim]])
            sizes = self.gather(size) if self.num_processes > 1 else size
            longest = int(sizes.max().item())
            if t.shape[dim] == longest:
                return t
            shape = list(t.shape)
            shape[dim] = longest - t.shape[dim]
            pad = tb.full(shape, pad_index, dtype=t.dtype, device=t.device)
            return tb.cat([pad, t] if pad_first else [t, pad], dim=dim)
        return _recurse(tensor, one)


def _recurse(obj, fn):
    from ..tensor import Tensor
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_recurse(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: _recurse(v, fn) for k, v in obj.items()}
    return obj


def _has_tensor(obj) -> bool:
    from ..tensor import Tensor
    if isinstance(obj, Tensor):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_has_tensor(o) for o in obj)
    if isinstance(obj, dict):
        return any(_has_tensor(o) for o in obj.values())
    return False


def _split(inputs, n: int, rank: int, pad: bool):
    if isinstance(inputs, dict):
        return {k: _split(v, n, rank, pad) for k, v in inputs.items()}
    length = len(inputs)
    per, extra = divmod(length, n)
    start = rank * per + min(rank, extra)
    stop = start + per + (1 if rank < extra else 0)
    part = inputs[start:stop]
    if pad and extra and rank >= extra and length:
        last = inputs[stop - 1:stop] if stop > start else inputs[-1:]
        if isinstance(part, list):
            part = part + list(last)
        elif isinstance(part, tuple):
            part = part + tuple(last)
        else:
            import tensorbrain as tb
            part = tb.cat([part, last], dim=0)
    return part
