"""Writes torch_checkpoint.pt, the torch-made file tests/test_torch_format.py reads without torch.

Run with real torch (2.13 made the committed file): ``python tests/assets/make_torch_checkpoint.py``.
Every value is a function of ``np.arange``, so the test computes what it must hold with NumPy
(``expected()`` below, imported by the test).
"""
from __future__ import annotations

import collections
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "torch_checkpoint.pt")


def expected() -> dict:
    """The arrays of the state dict, by key, as NumPy computes them (bfloat16 via ml_dtypes)."""
    import ml_dtypes
    a6 = np.arange(6).reshape(2, 3)
    return {
        "fc.weight": (a6 / 8).astype(np.float32),
        "fc.bias": (np.arange(2) - 0.5).astype(np.float64),
        "emb.weight": (np.arange(8).reshape(4, 2) / 4).astype(ml_dtypes.bfloat16),
        "half": (np.arange(3) / 2).astype(np.float16),
        "window": np.arange(10, dtype=np.int64)[2:7],
        "transposed": (a6.T / 2).astype(np.float32),
        "u16": np.arange(5, dtype=np.uint16) * 1000,
        "mask": np.arange(4) % 2 == 0,
        "z": (np.arange(3) + 1j * np.arange(3)).astype(np.complex64),
        "scalar": np.array(7, dtype=np.int32),
    }


def main() -> None:
    import torch
    want = expected()
    sd = collections.OrderedDict()
    for key, arr in want.items():
        if key == "window":
            sd[key] = torch.arange(10)[2:7]  # a view: storage of 10, offset 2
        elif key == "transposed":
            sd[key] = torch.from_numpy(arr.T.copy()).t()  # non-contiguous
        elif arr.dtype == np.dtype("bfloat16"):
            sd[key] = torch.from_numpy(arr.astype(np.float32)).to(torch.bfloat16)
        else:
            sd[key] = torch.from_numpy(arr.copy())
    sd["tied.weight"] = sd["fc.weight"]  # the same tensor twice: one storage
    obj = {"model": sd,
           "param": torch.nn.Parameter(torch.ones(2)),
           "frozen": torch.nn.Parameter(torch.zeros(1), requires_grad=False),
           "grad": torch.tensor([1.0], requires_grad=True),
           "meta": {"epoch": 3, "lr": 0.25, "name": "run-1", "none": None, "flags": [True, False],
                    "pair": (1, 2), "big": 2 ** 40, "bytes": b"ab", "set": {1, 2}},
           "dtype": torch.bfloat16, "device": torch.device("cpu"), "size": torch.Size([2, 3])}
    torch.save(obj, PATH)
    print(f"wrote {PATH} ({os.path.getsize(PATH)} bytes) with torch {torch.__version__}")


if __name__ == "__main__":
    main()
