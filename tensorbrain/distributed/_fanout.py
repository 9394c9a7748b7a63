"""tbrun's hostfile fan-out (``--hostfile``, ``-H``): one agent per host over ssh."""
from __future__ import annotations


def fanout_not_here(ns) -> None:
    """Raise: the ssh fan-out is not supported yet (DeepSpeed's --hostfile, horovodrun's -H)."""
    from .run import UsageError
    what = "--hostfile" if ns.hostfile else "-H"
    raise UsageError(f"{what}: starting agents on other hosts over ssh is not supported yet; "
                     "run the same tbrun command on every host (node ranks are given by "
                     "arrival at --rdzv_endpoint HOST:PORT)")
