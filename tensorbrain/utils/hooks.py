"""``tb.utils.hooks`` (``torch.utils.hooks``): :class:`RemovableHandle`, the handle every hook
registration returns (the one ``nn.Module`` uses)."""
from __future__ import annotations

from ..nn.modules._module_hooks import RemovableHandle


def unserializable_hook(f):
    """Mark a tensor hook as one pickling skips (a marker, as torch's).

    Args:
        f: the hook.
    """
    f.__torch_unserializable__ = True
    return f


def warn_if_has_hooks(tensor) -> None:
    """Warn when ``tensor`` has hooks that pickling would drop (as torch's).

    Args:
        tensor: a tensor.
    """
    if getattr(tensor, "_hooks", None):
        import warnings
        warnings.warn("backward hooks of a tensor are not serialized with it", stacklevel=2)


__all__ = ["RemovableHandle", "unserializable_hook", "warn_if_has_hooks"]
