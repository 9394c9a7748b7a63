"""Collective benchmark in the style of nccl-tests: a thin wrapper so old commands keep working.

The implementation is the installed command ``tb-collectives``
(``python -m tensorbrain.benchmarks.collectives``, tensorbrain/benchmarks/collectives.py); this
script takes the same arguments::

    python benchmarks/collectives.py all_reduce -b 8 -e 64M -d float -o sum
    tbrun --standalone --nproc_per_node 2 benchmarks/collectives.py -b 8 -e 256M --compare torch
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tensorbrain.benchmarks.collectives import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
