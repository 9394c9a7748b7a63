"""Join / Joinable / JoinHook (``tensorbrain.distributed.algorithms.join``) in real processes.

A small Joinable that all_reduces one counter per iteration stands in for any user class: rank r
runs r + 2 iterations, so without the join context the ranks with fewer iterations would leave
the others waiting in their all_reduce. DDP's own join is tested in tests/nn/parallel/test_ddp.py.
"""
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.distributed.algorithms.join import Join, Joinable, JoinHook

HERE = "tests.distributed.test_join"


class _Hook(JoinHook):
    def __init__(self, counter):
        self.counter = counter

    def main_hook(self):
        t = tb.zeros(1)                        # a joined rank adds nothing
        dist.all_reduce(t)
        self.counter.total += t.item()
        self.counter.shadowed += 1

    def post_hook(self, is_last_joiner):
        self.counter.last_joiner = is_last_joiner


class _Counter(Joinable):
    def __init__(self):
        super().__init__()
        self.total = 0.0
        self.shadowed = 0
        self.last_joiner = None

    def step(self):
        Join.notify_join_context(self)
        t = tb.ones(1)
        dist.all_reduce(t)                     # counts the ranks still stepping
        self.total += t.item()

    def join_hook(self, **kwargs):
        return _Hook(self)

    @property
    def join_device(self):
        return tb.device("cpu")

    @property
    def join_process_group(self):
        return None


def _uneven(rank, world, throw):
    c = _Counter()
    try:
        with Join([c], throw_on_early_termination=throw):
            for _ in range(rank + 2):
                c.step()
    except RuntimeError as exc:
        return {"error": str(exc)}
    return {"total": c.total, "shadowed": c.shadowed, "last": c.last_joiner,
            "config_after": c._join_config.enable}


def test_uneven_iterations_finish_on_every_rank(workers):
    world = 3
    res = workers(f"{HERE}:_uneven", world, False)
    # iteration i is stepped by the ranks with i < r + 2: every rank sees the same sums
    expected = float(sum(sum(1 for r in range(world) if i < r + 2) for i in range(world + 1)))
    for rank, r in enumerate(res):
        assert r["total"] == expected
        assert r["shadowed"] == (world + 1) - (rank + 2)
        assert r["last"] == (rank == world - 1)
        assert r["config_after"] is False      # a later step issues no join collective


def test_throw_on_early_termination_raises_on_every_rank(workers):
    res = workers(f"{HERE}:_uneven", 2, True)
    for r in res:
        assert "exhausted its inputs" in r["error"] and "1 of 2 ranks have joined" in r["error"]


def test_join_checks_its_arguments():
    with pytest.raises(ValueError, match="at least one joinable"):
        Join([])
    with pytest.raises(TypeError):
        Joinable()  # abstract: join_hook, join_device, join_process_group

    class _Two(_Counter):
        @property
        def join_process_group(self):
            return object()
    with pytest.raises(ValueError, match="multiple process groups"):
        Join([_Counter(), _Two()])
    c = _Counter()
    Join([c], enable=True)
    with pytest.raises(RuntimeError, match="cannot be nested"):
        Join([c])
