"""The one way TensorBrain refuses a torch name it does not support.

A name that cannot be supported (TorchScript archives, CUDA-graph capture, quantized kernels,
C++ extensions...) still exists at torch's path, so a program that only imports it or checks
``isinstance`` against it goes on; using it raises :class:`NotSupportedError` (a
``NotImplementedError``) that names it, says why and what to use. Each refusal carries
``__tb_refuses__`` (the reason), so ``python -m tensorbrain.testing.api_coverage`` counts it
as *refusing*, not as present.

>>> from tensorbrain._unsupported import unsupported
>>> script_save = unsupported("torch.jit.save", "TensorBrain writes no TorchScript archives",
...                           "tb.save(model.state_dict(), path)")
>>> try:
...     script_save(None, "m.pt")
... except NotImplementedError as e:
...     print(str(e).split(":")[0])
torch.jit.save is not supported by TensorBrain
"""
from __future__ import annotations


class NotSupportedError(NotImplementedError):
    """A torch name TensorBrain has on purpose but does not support (see the message)."""


def _message(name: str, why: str, use: str) -> str:
    msg = f"{name} is not supported by TensorBrain: {why}"
    return msg + (f". Use {use} instead" if use else "")


def unsupported(name: str, why: str, use: str = ""):
    """A function that raises :class:`NotSupportedError` naming ``name`` when called.

    Args:
        name: torch's full name (``"torch.jit.save"``).
        why: why TensorBrain does not support it.
        use: what to use instead (empty when there is nothing).

    Returns:
        The refusing function, marked with ``__tb_refuses__``.
    """
    msg = _message(name, why, use)

    def refuse(*args, **kwargs):
        raise NotSupportedError(msg)
    refuse.__name__ = refuse.__qualname__ = name.rsplit(".", 1)[-1]
    refuse.__doc__ = f"Not supported: raises NotSupportedError ({msg})."
    refuse.__tb_refuses__ = msg  # type: ignore[attr-defined]
    return refuse


def unsupported_class(name: str, why: str, use: str = "") -> type:
    """A class that raises :class:`NotSupportedError` when instantiated.

    ``isinstance(x, cls)`` is False for everything and the class can be named in annotations
    and ``except``-free checks, as programs do with ``torch.fx.GraphModule`` or
    ``torch.cuda.CUDAGraph``.

    Args:
        name: torch's full name (``"torch.cuda.CUDAGraph"``).
        why: why TensorBrain does not support it.
        use: what to use instead.

    Returns:
        The class, marked with ``__tb_refuses__``.
    """
    msg = _message(name, why, use)

    def __init__(self, *args, **kwargs):
        raise NotSupportedError(msg)
    module, _, short = name.rpartition(".")
    return type(short, (), {"__init__": __init__, "__tb_refuses__": msg,
                            "__doc__": f"Not supported: instantiating it raises NotSupportedError "
                                       f"({msg}).",
                            "__module__": "tensorbrain" + module[len("torch"):]})


def refuse_names(namespace: dict, module: str, names: str, why: str, use: str = "") -> None:
    """Define each of ``names`` in ``namespace`` as a refusal (a class for capitalised names).

    Used by the modules that stand for a torch package TensorBrain does not support
    (``tensorbrain/fx.py`` lists ``torch.fx``'s names), so the names are written, greppable,
    in that module.

    Args:
        namespace: the module's ``globals()``.
        module: torch's module path (``"torch.fx"``).
        names: the names, separated by spaces.
        why: why it is not supported.
        use: what to use instead.
    """
    for short in names.split():
        full = f"{module}.{short}"
        namespace[short] = (unsupported_class(full, why, use) if short[0].isupper()
                            else unsupported(full, why, use))


__all__ = ["NotSupportedError", "refuse_names", "unsupported", "unsupported_class"]
