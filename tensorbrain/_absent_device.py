"""The device modules of accelerators TensorBrain does not drive (``torch.xpu``, ``torch.mps``):
what torch's build without that accelerator answers, name by name, so device-agnostic programs
(``if torch.xpu.is_available(): ...``, ``torch.mps.empty_cache()`` guarded or not) take the
same branch as under torch on this machine.

Each module lists its names in a table ``name -> kind``: ``"false"``, ``"zero"``, ``"none"``
(returns None: a setter or a cache flush), ``"empty"`` (an empty tuple or list), or
``"raise"`` (torch raises there; the error says the accelerator is not available and to use the
CPU or CUDA). :func:`fill` defines them in the module.
"""
from __future__ import annotations

_RESULTS = {"false": False, "zero": 0, "none": None, "empty": ()}


def _function(module: str, name: str, kind: str, device: str):
    label = f"torch.{module}.{name}"
    if kind == "raise":
        def fn(*args, **kwargs):
            raise RuntimeError(f"{label}: TensorBrain has no {device} backend; run on the CPU "
                               f"or on CUDA (tb.cuda) instead")
        summary = f"Raises RuntimeError: TensorBrain has no {device} backend (as torch built " \
                  f"without it)."
    else:
        value = _RESULTS[kind]

        def fn(*args, **kwargs):
            return value
        summary = f"Returns {value!r}: TensorBrain has no {device} backend (what torch built " \
                  f"without it returns)."
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{summary}\n\nArgs:\n    *args: accepted.\n    **kwargs: accepted.\n"
    return fn


def fill(namespace: dict, module: str, device: str, table: dict) -> None:
    """Define ``table``'s names in ``namespace`` (a module's ``globals()``).

    Args:
        namespace: the module's globals.
        module: torch's module name after ``torch.`` (``"xpu"``).
        device: the accelerator's name for messages (``"XPU"``).
        table: name -> kind (see the module docstring).
    """
    for name, kind in table.items():
        namespace[name] = _function(module, name, kind, device)
