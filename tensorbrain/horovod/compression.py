"""Gradient compression for Horovod's all-reduces (``hvd.Compression``)."""
from __future__ import annotations


class Compressor:
    """Turns a tensor into what is sent, and back."""

    @staticmethod
    def compress(tensor):
        """What to send.

        Args:
            tensor: the tensor.

        Returns:
            ``(tensor to send, context)``.
        """
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        """The received tensor back in the original form.

        Args:
            tensor: the received tensor.
            ctx: the context :meth:`compress` returned.
        """
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Send as is."""

    @staticmethod
    def compress(tensor):
        """``(tensor, None)``: sent as is."""
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        """``tensor`` as received."""
        return tensor


class FP16Compressor(Compressor):
    """Send floating tensors as float16 (half the bytes); back to their dtype after."""

    @staticmethod
    def compress(tensor):
        """A floating tensor as float16, with its dtype as the context."""
        import tensorbrain as tb
        if tensor.is_floating_point() and tensor.dtype != tb.float16:
            return tensor.to(tb.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        """Back to the original dtype."""
        return tensor if ctx is None else tensor.to(ctx)


class Compression:
    """``Compression.none`` and ``Compression.fp16``."""

    none = NoneCompressor
    fp16 = FP16Compressor
