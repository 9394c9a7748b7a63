"""``HuggingFaceStorageWriter``/``Reader``: checkpoints as Hugging Face safetensors folders.

The writer turns a ``dcp.save`` into what ``transformers``' ``from_pretrained`` reads: every rank
writes its pieces as usual, then rank 0 joins each tensor whole and writes
``model-0000K-of-0000N.safetensors`` files (``fqn_to_index_mapping`` says which key goes to which
file; default one file) and ``model.safetensors.index.json``, and deletes the pieces. Each file is
written atomically and the index last. The consolidated tensors pass through rank 0's memory one
file at a time. Only tensors can be stored (safetensors holds nothing else).

The reader makes any folder of ``*.safetensors`` files (a Hugging Face model, or the writer's
output) loadable with ``dcp.load`` at any world size: a DTensor reads only its shard's bytes.
"""
from __future__ import annotations

import json
import os

import numpy as np

from ... import _atomic
from .filesystem import _OURS, FileSystemReader, FileSystemWriter, _safetensors

__all__ = ["HuggingFaceStorageReader", "HuggingFaceStorageWriter"]

INDEX = "model.safetensors.index.json"
# safetensors' dtype codes -> NumPy's names (the metadata's dtype strings)
_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
           "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
           "U16": "uint16", "U32": "uint32", "U64": "uint64", "BOOL": "bool"}


class HuggingFaceStorageWriter(FileSystemWriter):
    """Save a state dict as a Hugging Face safetensors folder (torch's ``HuggingFaceStorageWriter``).

    Args:
        path (str | os.PathLike): the output folder.
        fqn_to_index_mapping (dict[str, int] | None): key -> file number (1-based); keys not in
            it go to file 1. None: one file.
        thread_count (int): accepted for torch's signature (one thread writes).
        save_distributed (bool): accepted; every rank writes its pieces and rank 0 joins them.
        enable_consolidation (bool): accepted; the output is always consolidated.
        thread_count_consolidation (int): accepted for torch's signature.

    Raises:
        TypeError: ``fqn_to_index_mapping`` is not a dict of positive ints.
    """

    def __init__(self, path, fqn_to_index_mapping: dict | None = None, thread_count: int = 1,
                 save_distributed: bool = False, enable_consolidation: bool = False,
                 thread_count_consolidation: int = 1):
        super().__init__(path)
        mapping = dict(fqn_to_index_mapping or {})
        bad = [k for k, v in mapping.items() if not isinstance(v, int) or v < 1]
        if bad:
            raise TypeError(f"fqn_to_index_mapping must map keys to file numbers >= 1; "
                            f"{bad[0]!r} maps to {mapping[bad[0]]!r}")
        self.fqn_to_index_mapping = mapping

    def check_plan(self, entries: dict) -> None:
        """Refuse non-tensor values before anything is written (safetensors holds tensors).

        Args:
            entries: the save's metadata entries.

        Raises:
            ValueError: the state dict holds non-tensor values.
        """
        values = [k for k, e in entries.items() if e["type"] != "tensor"]
        if values:
            raise ValueError(f"HuggingFaceStorageWriter stores tensors only; the state dict has "
                             f"non-tensor values at {values[:5]}: save them separately")

    def commit(self, metadata: dict, token: str) -> None:
        """Join every tensor whole into the Hugging Face files, write the index, drop pieces.

        Args:
            metadata: the save's metadata (every key and chunk).
            token: this save's name.
        """
        entries = metadata["state_dict_metadata"]
        stn, _ = _safetensors()
        count = max([1, *self.fqn_to_index_mapping.values()])
        groups: dict[int, list] = {}
        for key in entries:
            groups.setdefault(self.fqn_to_index_mapping.get(key, 1), []).append(key)
        pieces = FileSystemReader(self.path)
        weight_map, total = {}, 0
        try:
            for index in sorted(groups):
                name = f"model-{index:05d}-of-{count:05d}.safetensors"
                arrays = {}
                for key in groups[index]:
                    e = entries[key]
                    whole = np.empty(e["size"], dtype=_np_dtype(e["dtype"]))
                    for c in e["chunks"]:
                        box = tuple(slice(o, o + n) for o, n in zip(c["offsets"], c["lengths"],
                                                                   strict=True))
                        whole[box] = pieces.read(c["file"], c["key"], ())
                    arrays[key] = whole
                    weight_map[key] = name
                    total += whole.nbytes
                _atomic.write(os.path.join(self.path, name),
                              _atomic.safetensors_fill(stn.save_file, arrays, {"format": "pt"}),
                              fsync=self.sync_files)
        finally:
            pieces.close()
        doc = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}

        def fill(tmp):
            with open(tmp, "w") as f:
                json.dump(doc, f, indent=2)
        _atomic.write(os.path.join(self.path, INDEX), fill, fsync=self.sync_files)
        for entry in os.listdir(self.path):
            if _OURS.match(entry):
                _atomic.remove(os.path.join(self.path, entry))


def _np_dtype(name: str):
    from ..._dtype import as_dtype
    return as_dtype(name)


class HuggingFaceStorageReader(FileSystemReader):
    """Load from a folder of ``*.safetensors`` files (torch's ``HuggingFaceStorageReader``).

    Every tensor of every file is a key (the file's own names: ``model.layers.0.weight``);
    ``dcp.load`` fills the state dict's tensors from them, reading only the bytes each rank's
    pieces need.

    Args:
        path (str | os.PathLike): the folder.
        thread_count (int): accepted for torch's signature.
        key_mapping (dict | None): not supported (must be None; rename the state dict's keys).

    Raises:
        NotImplementedError: ``key_mapping`` given.
    """

    def __init__(self, path, thread_count: int = 1, key_mapping: dict | None = None):
        if key_mapping:
            raise NotImplementedError("HuggingFaceStorageReader(key_mapping=...) is not "
                                      "supported: rename the keys of the state dict instead")
        super().__init__(path)

    def read_json(self) -> dict:
        """Every tensor of the folder's safetensors files as a metadata document.

        Raises:
            FileNotFoundError: the folder holds no ``.safetensors`` file.
        """
        _, safe_open = _safetensors()
        try:
            files = sorted(f for f in os.listdir(self.path)
                           if f.endswith(".safetensors") and not _OURS.match(f))
        except FileNotFoundError:
            files = []
        if not files:
            raise FileNotFoundError(f"no Hugging Face checkpoint at {self.path!r}: it holds no "
                                    f".safetensors file")
        entries = {}
        for file in files:
            with safe_open(os.path.join(self.path, file), framework="numpy") as handle:
                for key in handle.keys():
                    part = handle.get_slice(key)
                    shape = [int(n) for n in part.get_shape()]
                    code = part.get_dtype()
                    entries[key] = {"type": "tensor", "dtype": _DTYPES.get(code, code.lower()),
                                    "size": shape,
                                    "chunks": [{"file": file, "key": key, "offsets": [0] * len(shape),
                                                "lengths": shape}]}
        return {"format": "huggingface-safetensors", "state_dict_metadata": entries}
