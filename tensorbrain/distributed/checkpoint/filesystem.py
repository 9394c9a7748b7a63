"""Checkpoint folders: one safetensors file per writing rank plus a JSON ``.metadata``.

Layout of ``checkpoint_id/``::

    .metadata                        JSON: every key, its dtype and global size, and where each
                                     chunk lives (file, entry, offsets, lengths); JSON values inline
    __<rank>_<token>.safetensors     the chunks rank <rank> wrote in the save named <token>

A save is atomic. Data files get names no earlier save used (the token is new each time), each is
written in a temp folder of its own (``tensorbrain._atomic``), fsynced and renamed; only after
every rank has finished does rank 0 write ``.metadata.<token>.tmp``, fsync it and rename it over ``.metadata``. That rename is the commit:
until it happens ``.metadata`` still names the previous save's files, which are untouched, so a
crash anywhere (SIGKILL included) leaves the previous checkpoint whole. After the commit rank 0
deletes the files of earlier saves and any leftovers of crashed ones.
"""
from __future__ import annotations

import enum
import json
import os
import re

import numpy as np

from ... import _atomic
from .metadata import Metadata
from .storage import StorageReader, StorageWriter

METADATA = ".metadata"
#: the data files' suffix (torch's ``.distcp``; TensorBrain's data files are safetensors).
DEFAULT_SUFFIX = ".safetensors"


class SerializationFormat(enum.Enum):
    """The data files' format (torch's names); TensorBrain writes ``SAFETENSORS`` only."""
    TORCH_SAVE = "torch_save"
    SAFETENSORS = "safetensors"

FORMAT = "tensorbrain.distributed.checkpoint/1"
# a save's files: data files (and the ``.tmp`` files of versions before the temp folders), the
# metadata's temp file, and a data file's temp folder (``_atomic``: ``.<name>.tbtmp-...tmp/``)
_OURS = re.compile(r"^(__\d+_(?P<tok>[0-9a-f]+)\.safetensors(\.tmp)?|"
                   r"\.metadata\.(?P<mtok>[0-9a-f]+)\.tmp|"
                   r"\.__\d+_(?P<ttok>[0-9a-f]+)\.safetensors\.tbtmp-.*\.tmp)$")


def _safetensors():
    try:
        import safetensors.numpy as stn
        from safetensors import safe_open
    except ImportError as exc:
        raise ImportError(f"distributed checkpoints need the safetensors package ({exc}); "
                          f"install it with `pip install safetensors`") from None
    return stn, safe_open


class FileSystemWriter(StorageWriter):
    """Writes a checkpoint into the folder ``path`` (torch's ``FileSystemWriter``).

    Args:
        path: the checkpoint folder (created if missing; shared by all ranks).
        single_file_per_rank: must be True (one file per rank is the only layout).
        sync_files: fsync files and the folder before the commit (default True).
        thread_count: accepted for torch's signature; writes use one thread.
        per_thread_copy_ahead: accepted for torch's signature; unused.
        serialization_format: ``SerializationFormat.SAFETENSORS`` (the default; ``TORCH_SAVE``
            would be pickle, which TensorBrain's checkpoints never hold).

    Raises:
        NotImplementedError: ``single_file_per_rank=False`` or ``TORCH_SAVE``.
    """

    def __init__(self, path, single_file_per_rank: bool = True, sync_files: bool = True,
                 thread_count: int = 1, per_thread_copy_ahead: int = 10_000_000,
                 serialization_format: SerializationFormat = SerializationFormat.SAFETENSORS):
        if SerializationFormat(serialization_format) != SerializationFormat.SAFETENSORS:
            raise NotImplementedError("FileSystemWriter(serialization_format=TORCH_SAVE) is not "
                                      "supported: TensorBrain's checkpoints are safetensors, "
                                      "never pickle; leave the default (SAFETENSORS)")
        if not single_file_per_rank:
            raise NotImplementedError("FileSystemWriter(single_file_per_rank=False) is not "
                                      "supported: each rank writes one file")
        self.path = os.fspath(path)
        self.sync_files = bool(sync_files)

    def check_plan(self, entries: dict) -> None:
        """Refuse a save this writer cannot store, before anything is written (every key is
        fine here; ``HuggingFaceStorageWriter`` takes tensors only).

        Args:
            entries: the save's metadata entries (key -> tensor or value description).
        """

    def write_rank(self, rank: int, token: str, arrays: dict) -> str | None:
        """Write ``{entry name: array}`` as this rank's file, under ``.tmp`` then renamed.

        Args:
            rank: this rank (in the saving group).
            token: the save's name, new for every save.
            arrays: the chunks this rank writes.

        Returns:
            The file's name in the folder, or None when there was nothing to write.
        """
        if not arrays:
            return None
        stn, _ = _safetensors()
        os.makedirs(self.path, exist_ok=True)
        name = f"__{rank}_{token}.safetensors"
        final = os.path.join(self.path, name)
        host = {k: np.ascontiguousarray(_to_numpy(a)) if a.ndim else _to_numpy(a).copy()
                for k, a in arrays.items()}
        # through a private temp folder: safetensors' own temp file (.tmpXXXXXX) lands there,
        # and a killed save's folder is removed by the next commit (its token is not current)
        _atomic.write(final, _atomic.safetensors_fill(stn.save_file, host, {"format": FORMAT}),
                      fsync=self.sync_files)
        return name

    def commit(self, metadata: dict, token: str) -> None:
        """Make ``metadata`` the checkpoint (one atomic rename), then delete older files.

        Args:
            metadata: the JSON-able description of every key and chunk.
            token: this save's name; files of other saves are deleted after the rename.
        """
        os.makedirs(self.path, exist_ok=True)
        if self.sync_files:
            _atomic.fsync_dir(self.path)  # the data files' renames are durable before the commit
        tmp = os.path.join(self.path, f".metadata.{token}.tmp")
        with open(tmp, "w") as fh:
            json.dump(metadata, fh, separators=(",", ":"))
            fh.flush()
            if self.sync_files:
                os.fsync(fh.fileno())
        os.replace(tmp, os.path.join(self.path, METADATA))
        if self.sync_files:
            _atomic.fsync_dir(self.path)
        for entry in os.listdir(self.path):
            m = _OURS.match(entry)
            if m and (m.group("tok") or m.group("mtok") or m.group("ttok")) != token:
                _atomic.remove(os.path.join(self.path, entry))


class FileSystemReader(StorageReader):
    """Reads a checkpoint folder written by :class:`FileSystemWriter` (torch's name).

    Args:
        path: the checkpoint folder.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self._open: dict = {}

    def read_metadata(self) -> Metadata:
        """Every key the checkpoint holds, with dtypes, sizes and chunks (torch's dataclasses).

        Raises:
            FileNotFoundError: the folder holds no committed checkpoint.
            ValueError: ``.metadata`` is not a checkpoint of this format.
        """
        return Metadata.from_json(self.read_json(), self.path)

    def read_json(self) -> dict:
        """The parsed ``.metadata`` (TensorBrain's JSON, which ``load`` reads).

        Raises:
            FileNotFoundError: the folder holds no committed checkpoint.
            ValueError: ``.metadata`` is not a checkpoint of this format.
        """
        path = os.path.join(self.path, METADATA)
        try:
            with open(path) as fh:
                md = json.load(fh)
        except FileNotFoundError:
            raise FileNotFoundError(f"no distributed checkpoint at {self.path!r}: {METADATA} is "
                                    f"missing (was the save finished?)") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not valid JSON ({exc})") from None
        if not isinstance(md, dict) or md.get("format") != FORMAT:
            raise ValueError(f"{path} is not a TensorBrain distributed checkpoint (format "
                             f"{md.get('format') if isinstance(md, dict) else None!r}, "
                             f"expected {FORMAT!r})")
        return md

    def read(self, file: str, entry: str, slices: tuple) -> np.ndarray:
        """``slices`` of the array ``entry`` in ``file`` (reads only that part).

        Args:
            file: a data file named in the metadata.
            entry: the chunk's entry name in that file.
            slices: one slice per dimension, relative to the chunk.

        Returns:
            A NumPy array.

        Raises:
            FileNotFoundError: the file named in the metadata is missing.
        """
        handle = self._open.get(file)
        if handle is None:
            _, safe_open = _safetensors()
            path = os.path.join(self.path, file)
            if not os.path.exists(path):
                raise FileNotFoundError(f"checkpoint {self.path!r} is incomplete: {file} named "
                                        f"in {METADATA} is missing")
            handle = self._open[file] = safe_open(path, framework="numpy")
        part = handle.get_slice(entry)
        return np.asarray(part[slices] if slices else handle.get_tensor(entry))

    def close(self) -> None:
        """Drop the open files."""
        self._open.clear()


def _to_numpy(a):
    from ... import _xp
    return _xp.to_numpy(a)
