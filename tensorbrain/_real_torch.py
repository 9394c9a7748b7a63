"""Recognising the real PyTorch's objects where TensorBrain's are expected.

A program moved to a front door (``tensorbrain.accelerate``, ``.deepspeed``, ``.horovod``,
``.ezpz``) by changing only that import still builds its model, optimizer and tensors with the
real ``torch``. TensorBrain cannot train those: without a check, ``Accelerator.prepare`` would
hand them back unwrapped (every process training alone) and the collectives would fail with
messages that name ``Tensor`` without saying whose. These helpers say what to change.
"""
from __future__ import annotations

HINT = ("change `import torch` to `import tensorbrain as torch` (and `from torch... import` to "
        "`from tensorbrain... import`), or keep the program unchanged and run it with "
        "`tbrun --as-torch` / `python -m tensorbrain.as_torch`")


def is_pytorch_object(obj) -> bool:
    """Whether ``obj`` is an instance of a class of the real PyTorch (or of a subclass of one).

    Args:
        obj: any object.

    Returns:
        True when a class in ``type(obj)``'s MRO comes from the ``torch`` package. Under the
        import alias ``torch`` is TensorBrain, whose classes live in ``tensorbrain``.

    Example:
        >>> import tensorbrain as tb
        >>> is_pytorch_object(tb.ones(2)), is_pytorch_object([1, 2])
        (False, False)
    """
    for cls in type(obj).__mro__:
        module = getattr(cls, "__module__", None) or ""
        if module == "torch" or module.startswith("torch."):
            return True
    return False


def pytorch_object_message(obj, where: str) -> str:
    """The message for a real PyTorch object given where TensorBrain's is expected.

    Args:
        obj: the object (a PyTorch tensor, module, optimizer, ...).
        where: what received it, e.g. ``"Accelerator.prepare"``.

    Returns:
        One sentence naming the object's class and saying what to change.

    Example:
        >>> pytorch_object_message(object(), "f").startswith("f: got builtins.object")
        True
    """
    cls = type(obj)
    return (f"{where}: got {cls.__module__}.{cls.__qualname__}, an object of the real PyTorch; "
            f"TensorBrain works on its own tensors, modules and optimizers: {HINT}")


def check_not_pytorch(obj, where: str) -> None:
    """Raise ``TypeError`` when ``obj`` is a real PyTorch object.

    Args:
        obj: the object to check.
        where: what received it (the message starts with it).

    Raises:
        TypeError: ``obj`` comes from the real ``torch`` (see :func:`pytorch_object_message`).

    Example:
        >>> check_not_pytorch(3, "f")   # anything not from the torch package passes
    """
    if is_pytorch_object(obj):
        raise TypeError(pytorch_object_message(obj, where))
