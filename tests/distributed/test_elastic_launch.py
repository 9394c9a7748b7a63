"""torch.distributed.launcher.api.elastic_launch: a function run as two workers of one
process group (real processes, the tcp backend), their return values, restarts and failures."""
import os

import pytest

from tensorbrain.distributed.elastic.multiprocessing.errors import ChildFailedError
from tensorbrain.distributed.launcher.api import LaunchConfig, elastic_launch


def _sum_ranks(offset):
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    dist.init_process_group("gloo")
    t = tb.tensor([float(dist.get_rank() + offset)])
    dist.all_reduce(t)
    out = (dist.get_rank(), dist.get_world_size(), t.item(), os.environ["LOCAL_RANK"])
    dist.destroy_process_group()
    return out


def _fail_on_rank_1_first_time():
    if os.environ["RANK"] == "1" and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
        raise RuntimeError("rank 1 breaks once")
    return int(os.environ["TORCHELASTIC_RESTART_COUNT"])


def _always_fail():
    raise ValueError(f"bad input on rank {os.environ['RANK']}")


@pytest.mark.timeout(120)
def test_function_runs_as_a_process_group():
    out = elastic_launch(LaunchConfig(1, 1, 2, max_restarts=0), _sum_ranks)(10)
    assert out == {0: (0, 2, 21.0, "0"), 1: (1, 2, 21.0, "1")}


@pytest.mark.timeout(120)
def test_restart_then_failure_names_the_ranks():
    assert elastic_launch(LaunchConfig(1, 1, 2, max_restarts=1),
                          _fail_on_rank_1_first_time)() == {0: 1, 1: 1}
    with pytest.raises(ChildFailedError) as info:
        elastic_launch(LaunchConfig(1, 1, 2, max_restarts=0), _always_fail)()
    assert set(info.value.failures) <= {0, 1} and info.value.failures
    assert "bad input on rank" in next(iter(info.value.failures.values()))
    with pytest.raises(ValueError, match="one node"):
        elastic_launch(LaunchConfig(1, 2, 2), _always_fail)()


def _sync_states():
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed.utils import _sync_module_states
    dist.init_process_group("gloo")
    tb.manual_seed(dist.get_rank())
    m = tb.nn.BatchNorm1d(3)
    m.running_mean.fill_(float(dist.get_rank() + 5))
    lin = tb.nn.Linear(3, 2)
    lin.weight.data.fill_(float(dist.get_rank()))
    seq = tb.nn.Sequential(lin, m)
    _sync_module_states(seq, None, 2 ** 20, 1, {"0.bias"})
    out = (seq[0].weight.sum().item(), seq[1].running_mean.tolist(), seq[0].bias.tolist())
    dist.destroy_process_group()
    return out


@pytest.mark.timeout(120)
def test_sync_module_states_copies_src():
    out = elastic_launch(LaunchConfig(1, 1, 2, max_restarts=0), _sync_states)()
    assert out[0][:2] == out[1][:2] == (6.0, [6.0, 6.0, 6.0])
    assert out[0][2] != out[1][2]   # the ignored bias keeps each rank's own values
