"""``tb.classes`` (``torch.classes``): the namespaces of TorchScript custom classes.

As in torch, ``tb.classes.<ns>`` is a namespace made on first use (``tb.classes.pyg``), and a
class in it is looked up when named: torch finds classes that a C++ library registered with
``torch::class_``; TensorBrain has no TorchScript runtime, so no class is ever registered and
the lookup raises torch's ``RuntimeError`` (saying so). ``load_library`` refuses by name: such a
library registers into libtorch, not into TensorBrain.

>>> import tensorbrain as tb
>>> tb.classes.pyg.name
'pyg'
>>> try:
...     tb.classes.pyg.CPUHashMap
... except RuntimeError as e:
...     print(str(e).split("!")[0])
Tried to instantiate class 'pyg.CPUHashMap', but it does not exist
"""
from __future__ import annotations

import types

from ._unsupported import unsupported

_WHY = ("TorchScript custom classes register into libtorch's runtime through torch::class_, "
        "which TensorBrain does not have")


class _ClassNamespace(types.ModuleType):
    """``tb.classes.<name>``: looking a class up in it raises (none is ever registered)."""

    def __init__(self, name: str) -> None:
        super().__init__("tensorbrain.classes." + name)
        self.name = name

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise RuntimeError(f"Tried to instantiate class '{self.name}.{attr}', but it does not "
                           f"exist! TensorBrain registers no TorchScript custom classes "
                           f"({_WHY}); use a Python class instead")


class _Classes(types.ModuleType):
    """``tb.classes``: any attribute is a :class:`_ClassNamespace`, kept once made."""

    def __init__(self) -> None:
        super().__init__("tensorbrain.classes", __doc__)
        self.loaded_libraries: set[str] = set()
        self.load_library = unsupported("torch.classes.load_library", _WHY,
                                        "a Python class (no C++ library is needed)")

    def __getattr__(self, name: str) -> _ClassNamespace:
        if name.startswith("__"):
            raise AttributeError(name)
        namespace = _ClassNamespace(name)
        setattr(self, name, namespace)
        return namespace


classes = _Classes()
