"""``tb.utils.data.datapipes`` (``torch.utils.data.datapipes``): torch's iterable DataPipes,
composable stages of an input pipeline (``IterableWrapper(files).map(load).shuffle().batch(32)``).
torch has deprecated them in favour of plain datasets; they are here because programs still
import them (PyG registers its own with ``functional_datapipe``; Accelerate checks for the
``Shuffler``). A DataPipe is an ``IterableDataset``, so a ``DataLoader`` takes one.
"""
from . import iter  # noqa: F401  (torch's sub-module, shadowing the builtin here as in torch)
from .datapipe import DataChunk, IterDataPipe, functional_datapipe

__all__ = ["DataChunk", "IterDataPipe", "functional_datapipe", "iter"]
