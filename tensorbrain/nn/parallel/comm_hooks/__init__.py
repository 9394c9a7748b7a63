"""DDP communication hooks (``torch.distributed.algorithms.ddp_comm_hooks``).

>>> from tensorbrain.nn.parallel.comm_hooks import fp16_compress_hook   # doctest: +SKIP
>>> ddp.register_comm_hook(None, fp16_compress_hook)                     # doctest: +SKIP
"""
from .._future import Future
from .default_hooks import allreduce_hook, bf16_compress_hook, bf16_round, fp16_compress_hook
from .post_localSGD_hook import PostLocalSGDState, post_localSGD_hook
from .powerSGD_hook import PowerSGDState, powerSGD_hook

__all__ = ["Future", "allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "bf16_round",
           "PostLocalSGDState", "PowerSGDState", "post_localSGD_hook", "powerSGD_hook"]
