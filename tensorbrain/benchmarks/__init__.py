"""Benchmarks shipped with TensorBrain: ``tb-collectives`` (``python -m
tensorbrain.benchmarks.collectives``), nccl-tests' table for tb.distributed. The other
benchmarks live in the repository's ``benchmarks/`` folder (docs/benchmarks.md)."""
