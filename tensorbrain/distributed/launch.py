"""``python -m tensorbrain.distributed.launch``: torch's deprecated launcher, kept for old commands.

torch.distributed.launch is torchrun with one difference: unless ``--use-env`` (``--use_env``) is
given, every worker also gets ``--local-rank=<its local rank>`` before its own arguments, so a
script written for it (``parser.add_argument("--local-rank", "--local_rank", type=int)``) runs
unchanged::

    python -m tensorbrain.distributed.launch --nproc_per_node=4 train.py --args
    python -m tensorbrain.distributed.launch --use-env --nproc_per_node=4 train.py --args

Every other option is tbrun's (torchrun's), see :mod:`tensorbrain.distributed.run`; workers see
``LOCAL_RANK`` in their environment as well. As in torch, ``--no-python`` needs ``--use-env``.
Like torch's, it says once that it is deprecated: use ``tbrun`` (torchrun's spelling), where
``--local-rank`` is not passed.
"""
from __future__ import annotations

import sys

from . import run as _run
from ._launcher.notice import notice

__all__ = ["main"]


def main(argv=None) -> int:
    """Run tbrun with torch.distributed.launch's ``--local-rank`` argument; returns the status.

    Args:
        argv: the arguments after the program name; None for ``sys.argv[1:]``.

    Returns:
        int: tbrun's exit status (0 success, 1 failure, 2 usage error, 128 + N after signal N).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    notice("tensorbrain.distributed.launch, like torch.distributed.launch, is deprecated: use "
           "tbrun (torchrun's options; LOCAL_RANK comes in the environment, no --local-rank)")
    return _run.main(["--_local_rank_arg=--local-rank", *argv])


if __name__ == "__main__":
    sys.exit(main())
