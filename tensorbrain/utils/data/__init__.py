"""``tb.utils.data``: data sets, samplers and the DataLoader, as ``torch.utils.data``.

>>> import tensorbrain as tb
>>> from tensorbrain.utils.data import DataLoader, TensorDataset
>>> loader = DataLoader(TensorDataset(tb.randn(10, 3), tb.arange(10)), batch_size=4)
>>> [tuple(x.shape) for x, _ in loader]
[(4, 3), (4, 3), (2, 3)]

``DistributedSampler`` (one shard per rank) loads on first use from ``.distributed``.
"""
from ._collate import default_collate, default_convert
from .dataloader import DataLoader, WorkerInfo, get_worker_info
from .dataset import (ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,
                      random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)
from .datapipes.datapipe import DataChunk, IterDataPipe, functional_datapipe
from . import graph_settings  # noqa: F401

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DataLoader", "get_worker_info", "WorkerInfo",
           "default_collate", "default_convert", "DistributedSampler", "DataChunk",
           "IterDataPipe", "functional_datapipe"]


def __getattr__(name):
    if name == "DistributedSampler":
        from .distributed import DistributedSampler
        return DistributedSampler
    if name == "distributed":  # torch.utils.data.distributed resolves without its own import
        import importlib
        return importlib.import_module(".distributed", __name__)
    raise AttributeError(f"module 'tensorbrain.utils.data' has no attribute {name!r}")
