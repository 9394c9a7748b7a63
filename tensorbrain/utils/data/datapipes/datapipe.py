"""``IterDataPipe`` and the ``functional_datapipe`` registry: ``@functional_datapipe("batch")``
on ``class Batcher(IterDataPipe)`` makes ``dp.batch(4)`` mean ``Batcher(dp, 4)``, as torch's."""
from __future__ import annotations

from typing import Any
from collections.abc import Callable

from ..dataset import IterableDataset


class IterDataPipe(IterableDataset):
    """A stage of an iterable input pipeline (torch's ``IterDataPipe``). Subclasses implement
    ``__iter__``; the stages registered with :func:`functional_datapipe` are methods of every
    DataPipe (``map``, ``filter``, ``batch``, ``shuffle``...)."""

    functions: dict[str, Callable] = {}

    def __getattr__(self, name: str) -> Any:
        fn = IterDataPipe.functions.get(name)
        if fn is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return lambda *args, **kwargs: fn(self, *args, **kwargs)

    @classmethod
    def register_datapipe_as_function(cls, function_name: str, cls_to_register: type) -> None:
        """Make ``dp.function_name(...)`` build ``cls_to_register(dp, ...)``.

        Args:
            function_name: the method name.
            cls_to_register: the DataPipe class.

        Raises:
            Exception: the name is taken, as torch's.
        """
        if function_name in cls.functions:
            raise Exception(f"Unable to add DataPipe function name {function_name} as it is "
                            f"already taken")
        cls.functions[function_name] = cls_to_register

    def reset(self) -> None:
        """Called when a new iterator starts (a Shuffler draws its seed here)."""

    def __repr__(self) -> str:
        return type(self).__qualname__


def functional_datapipe(name: str, enable_df_api_tracing: bool = False) -> Callable[[type], type]:
    """Register a DataPipe class as the method ``name`` of every DataPipe (torch's decorator).

    Args:
        name: the method name (``"batch"``).
        enable_df_api_tracing: accepted for torch's signature (no DataFrame API here).

    Example:
        >>> from tensorbrain.utils.data import IterDataPipe, functional_datapipe
        >>> @functional_datapipe("twice")
        ... class Twice(IterDataPipe):
        ...     def __init__(self, source):
        ...         self.source = source
        ...     def __iter__(self):
        ...         for x in self.source:
        ...             yield from (x, x)
        >>> from tensorbrain.utils.data.datapipes.iter import IterableWrapper
        >>> list(IterableWrapper([1, 2]).twice())
        [1, 1, 2, 2]
    """
    def register(cls: type) -> type:
        if not (isinstance(cls, type) and issubclass(cls, IterDataPipe)):
            raise TypeError("`functional_datapipe` can only decorate IterDataPipe subclasses")
        IterDataPipe.register_datapipe_as_function(name, cls)
        return cls
    return register


class DataChunk(list):
    """A batch from ``batch()``: a list (torch's ``DataChunk``)."""

    def as_str(self, indent: int = 0) -> str:
        """The batch as torch prints it."""
        return " " * indent + "[" + ", ".join(str(i) for i in iter(self)) + "]"

    def raw_iterator(self):
        """Iterate over the items."""
        yield from self


__all__ = ["DataChunk", "IterDataPipe", "functional_datapipe"]
