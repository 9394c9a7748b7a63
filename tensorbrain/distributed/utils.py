"""``tb.distributed.utils`` (``torch.distributed.utils``): the helpers programs borrow from
torch's DDP internals: ``_sync_module_states`` (Lightning calls it to give every rank rank
``src``'s weights) and ``_sync_params_and_buffers``."""
from __future__ import annotations

from collections.abc import Container


def _sync_params_and_buffers(process_group, module_states: list, broadcast_bucket_size: int,
                             src: int) -> None:
    """Broadcast ``module_states`` (tensors) from global rank ``src`` in place, coalesced.

    Args:
        process_group: the group (None: the default one).
        module_states: the tensors.
        broadcast_bucket_size: accepted for torch's signature (buckets are TensorBrain's).
        src: the global rank whose values everyone gets.
    """
    from .. import distributed as dist
    from ..nn.parallel.distributed import broadcast_coalesced
    if module_states and dist.get_world_size(process_group) > 1:
        broadcast_coalesced(dist, module_states, src, process_group)


def _sync_module_states(module, process_group, broadcast_bucket_size: int, src: int,
                        params_and_buffers_to_ignore: Container[str],
                        broadcast_buffers: bool = True) -> None:
    """Give every rank of the group rank ``src``'s parameters (and buffers), as torch's.

    Args:
        module: the module.
        process_group: the group (None: the default one).
        broadcast_bucket_size: accepted for torch's signature.
        src: the global rank to copy from.
        params_and_buffers_to_ignore: names left as they are.
        broadcast_buffers: copy the buffers too.
    """
    from ..autograd.grad_mode import no_grad
    states = [p.detach() for n, p in module.named_parameters()
              if n not in params_and_buffers_to_ignore]
    if broadcast_buffers:
        states += [b.detach() for n, b in module.named_buffers()
                   if n not in params_and_buffers_to_ignore]
    with no_grad():
        _sync_params_and_buffers(process_group, states, broadcast_bucket_size, src)


__all__: list[str] = []
