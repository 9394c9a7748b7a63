"""``tb.utils.data.datapipes.iter``: torch's iterable DataPipes, with their functional names:
``IterableWrapper``, ``Mapper`` (``map``), ``Filter`` (``filter``), ``Batcher`` (``batch``),
``UnBatcher`` (``unbatch``), ``Shuffler`` (``shuffle``), ``Concater`` (``concat``), ``Zipper``
(``zip``), ``FileLister`` (``list_files``), ``FileOpener`` (``open_files``). The other torch
DataPipes (``Demultiplexer``, ``Forker``, ``Grouper``, ...) are missing.

>>> from tensorbrain.utils.data.datapipes.iter import IterableWrapper
>>> list(IterableWrapper(range(7)).map(lambda x: x * 10).filter(lambda x: x != 30).batch(4))
[[0, 10, 20, 40], [50, 60]]
"""
from __future__ import annotations

import copy
import fnmatch
import os
import warnings
from typing import Any
from collections.abc import Callable

from ..datapipe import DataChunk, IterDataPipe, functional_datapipe
from .combinatorics import ShufflerIterDataPipe

Shuffler = ShufflerIterDataPipe


def _len(source: Any, name: str) -> int:
    try:
        return len(source)
    except TypeError:
        raise TypeError(f"{name} instance doesn't have valid length") from None


class IterableWrapper(IterDataPipe):
    """Any iterable as a DataPipe; each epoch iterates over a deep copy unless
    ``deepcopy=False`` (torch's ``IterableWrapper``).

    Args:
        iterable: the source.
        deepcopy: copy it at each new iteration (so the source is not consumed).
    """

    def __init__(self, iterable: Any, deepcopy: bool = True) -> None:
        self.iterable, self.deepcopy = iterable, deepcopy

    def __iter__(self):
        source = self.iterable
        if self.deepcopy:
            try:
                source = copy.deepcopy(self.iterable)
            except TypeError:
                warnings.warn("The input iterable can not be deepcopied, please be aware of "
                              "in-place modification would affect source data.", stacklevel=2)
        yield from source

    def __len__(self) -> int:
        return _len(self.iterable, type(self).__name__)


@functional_datapipe("map")
class Mapper(IterDataPipe):
    """``fn`` applied to each item (or to ``item[input_col]``, written to ``output_col``).

    Args:
        datapipe: the source.
        fn: the function.
        input_col: the index or key (or list of them) to pass to ``fn``; None: the item.
        output_col: where the result goes; None: replaces ``input_col``'s value.
    """

    def __init__(self, datapipe, fn: Callable, input_col=None, output_col=None) -> None:
        if input_col is None and output_col is not None:
            raise ValueError("`output_col` must be None when `input_col` is None.")
        if isinstance(output_col, (list, tuple)) and len(output_col) > 1:
            raise ValueError("`output_col` must be a single-element list or tuple")
        self.datapipe, self.fn = datapipe, fn
        self.input_col, self.output_col = input_col, output_col

    def _apply(self, data: Any) -> Any:
        if self.input_col is None:
            return self.fn(data)
        if isinstance(self.input_col, (list, tuple)):
            res = self.fn(*(data[c] for c in self.input_col))
        else:
            res = self.fn(data[self.input_col])
        out = list(data) if isinstance(data, tuple) else copy.copy(data)
        col = self.output_col
        if col is None:
            col = self.input_col[0] if isinstance(self.input_col, (list, tuple)) \
                else self.input_col
            if isinstance(self.input_col, (list, tuple)):
                for c in sorted(self.input_col[1:], reverse=True):
                    del out[c]
        elif isinstance(col, (list, tuple)):
            col = col[0]
        if col == -1 and isinstance(out, list):
            out.append(res)
        else:
            out[col] = res
        return tuple(out) if isinstance(data, tuple) else out

    def __iter__(self):
        for data in self.datapipe:
            yield self._apply(data)

    def __len__(self) -> int:
        return _len(self.datapipe, type(self).__name__)


@functional_datapipe("filter")
class Filter(IterDataPipe):
    """The items for which ``filter_fn`` (of ``item[input_col]`` when given) is true.

    Args:
        datapipe: the source.
        filter_fn: the predicate; it must return a bool.
        input_col: the index or key to test.
    """

    def __init__(self, datapipe, filter_fn: Callable, input_col=None) -> None:
        self.datapipe, self.filter_fn, self.input_col = datapipe, filter_fn, input_col

    def __iter__(self):
        for data in self.datapipe:
            arg = data if self.input_col is None else data[self.input_col]
            keep = self.filter_fn(arg)
            if not isinstance(keep, bool):
                raise ValueError(f"Boolean output is required for `filter_fn` of "
                                 f"FilterIterDataPipe, got {type(keep)}")
            if keep:
                yield data


@functional_datapipe("batch")
class Batcher(IterDataPipe):
    """Lists of ``batch_size`` consecutive items (the last may be shorter).

    Args:
        datapipe: the source.
        batch_size: the batch size (> 0).
        drop_last: drop a last, shorter batch.
        wrapper_class: the list type of a batch (``DataChunk``).
    """

    def __init__(self, datapipe, batch_size: int, drop_last: bool = False,
                 wrapper_class: type = DataChunk) -> None:
        assert batch_size > 0, "Batch size is required to be larger than 0!"
        self.datapipe, self.batch_size = datapipe, batch_size
        self.drop_last, self.wrapper_class = drop_last, wrapper_class

    def __iter__(self):
        batch: list = []
        for x in self.datapipe:
            batch.append(x)
            if len(batch) == self.batch_size:
                yield self.wrapper_class(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.wrapper_class(batch)

    def __len__(self) -> int:
        n = _len(self.datapipe, type(self).__name__)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


@functional_datapipe("unbatch")
class UnBatcher(IterDataPipe):
    """The items of the batches, ``unbatch_level`` levels down (-1: all the way).

    Args:
        datapipe: the source of batches.
        unbatch_level: how many levels.
    """

    def __init__(self, datapipe, unbatch_level: int = 1) -> None:
        self.datapipe, self.unbatch_level = datapipe, unbatch_level

    def _dive(self, element: Any, level: int):
        if level < -1:
            raise ValueError("unbatch_level must be -1 or >= 0")
        if level == -1:
            if isinstance(element, (list, DataChunk)):
                for item in element:
                    yield from self._dive(item, -1)
            else:
                yield element
        elif level == 0:
            yield element
        elif isinstance(element, (list, DataChunk)):
            for item in element:
                yield from self._dive(item, level - 1)
        else:
            raise IndexError(f"unbatch_level {self.unbatch_level} exceeds the depth of the "
                             f"DataPipe")

    def __iter__(self):
        for element in self.datapipe:
            yield from self._dive(element, self.unbatch_level)


@functional_datapipe("concat")
class Concater(IterDataPipe):
    """The DataPipes one after another.

    Args:
        *datapipes: the sources (at least one).
    """

    def __init__(self, *datapipes) -> None:
        if not datapipes:
            raise ValueError("Expected at least one DataPipe, but got nothing")
        if not all(isinstance(dp, IterDataPipe) for dp in datapipes):
            raise TypeError("Expected all inputs to be `IterDataPipe`")
        self.datapipes = datapipes

    def __iter__(self):
        for dp in self.datapipes:
            yield from dp

    def __len__(self) -> int:
        return sum(_len(dp, type(self).__name__) for dp in self.datapipes)


@functional_datapipe("zip")
class Zipper(IterDataPipe):
    """Tuples of one item from each DataPipe, until the shortest ends.

    Args:
        *datapipes: the sources.
    """

    def __init__(self, *datapipes) -> None:
        if not all(isinstance(dp, IterDataPipe) for dp in datapipes):
            raise TypeError("All inputs are required to be `IterDataPipe` for "
                            "`ZipIterDataPipe`.")
        self.datapipes = datapipes

    def __iter__(self):
        yield from zip(*self.datapipes)

    def __len__(self) -> int:
        return min(_len(dp, type(self).__name__) for dp in self.datapipes)


@functional_datapipe("list_files")
class FileLister(IterDataPipe):
    """The paths of the files under ``root`` whose names match ``masks`` (sorted, as torch's).

    Args:
        root: a directory or file, a list of them, or a DataPipe of them.
        masks: shell patterns (``"*.png"``); empty: every file.
        recursive: walk into sub-directories.
        abspath: yield absolute paths.
        non_deterministic: keep the file system's order.
        length: the length to report (-1: unknown).
    """

    def __init__(self, root: Any = ".", masks: str | list[str] = "", *, recursive: bool = False,
                 abspath: bool = False, non_deterministic: bool = False,
                 length: int = -1) -> None:
        if isinstance(root, str):
            root = [root]
        self.datapipe = root if isinstance(root, IterDataPipe) else IterableWrapper(root)
        self.masks, self.recursive, self.abspath = masks, recursive, abspath
        self.non_deterministic, self.length = non_deterministic, length

    def _match(self, name: str) -> bool:
        masks = [self.masks] if isinstance(self.masks, str) else self.masks
        return not masks or masks == [""] or any(fnmatch.fnmatch(name, m) for m in masks)

    def __iter__(self):
        for root in self.datapipe:
            if os.path.isfile(root):
                path = os.path.abspath(root) if self.abspath else root
                if self._match(os.path.basename(path)):
                    yield path
                continue
            for path, dirs, files in os.walk(root):
                if self.abspath:
                    path = os.path.abspath(path)
                if not self.non_deterministic:
                    files.sort()
                for f in files:
                    if self._match(f):
                        yield os.path.join(path, f)
                if not self.recursive:
                    break
                if not self.non_deterministic:
                    dirs.sort()

    def __len__(self) -> int:
        if self.length == -1:
            raise TypeError(f"{type(self).__name__} instance doesn't have valid length")
        return self.length


class StreamWrapper:
    """An open file handed out by ``FileOpener``: the file's methods, and closing it when the
    wrapper is collected (torch's ``StreamWrapper``)."""

    def __init__(self, file_obj: Any, name: str | None = None) -> None:
        self.file_obj, self.name = file_obj, name

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["file_obj"], name)

    def __iter__(self):
        return iter(self.file_obj)

    def __enter__(self) -> StreamWrapper:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.file_obj.close()

    def __del__(self) -> None:
        f = self.__dict__.get("file_obj")
        if f is not None and not getattr(f, "closed", True):
            f.close()


@functional_datapipe("open_files")
class FileOpener(IterDataPipe):
    """``(path, stream)`` for each path, the file opened with ``mode``.

    Args:
        datapipe: the paths.
        mode: ``"r"``, ``"rb"`` or ``"rt"``.
        encoding: the text encoding.
        length: the length to report (-1: unknown).

    Raises:
        ValueError: another mode, or an encoding with a binary mode, as torch's.
    """

    def __init__(self, datapipe, mode: str = "r", encoding: str | None = None,
                 length: int = -1) -> None:
        if mode not in ("b", "t", "rb", "rt", "r"):
            raise ValueError(f"Invalid mode {mode}")
        if "b" in mode and encoding is not None:
            raise ValueError("binary mode doesn't take an encoding argument")
        self.datapipe, self.mode, self.encoding, self.length = datapipe, mode, encoding, length

    def __iter__(self):
        for path in self.datapipe:
            yield path, StreamWrapper(open(path, self.mode, encoding=self.encoding), path)

    def __len__(self) -> int:
        if self.length == -1:
            raise TypeError(f"{type(self).__name__} instance doesn't have valid length")
        return self.length


__all__ = ["Batcher", "Concater", "FileLister", "FileOpener", "Filter", "IterableWrapper",
           "Mapper", "Shuffler", "StreamWrapper", "UnBatcher", "Zipper"]
