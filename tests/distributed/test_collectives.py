"""Every collective x dtype x ReduceOp against NumPy, in real worlds of 1 to 6 processes.

One launch per world size runs the whole suite (``collective_suite.run_all``): starting
processes dominates on a 2-core machine, so the checks are batched rather than one world each.
"""
import pytest

SUITE = "tests.distributed.collective_suite"


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_suite(workers, world_size):
    results = workers(f"{SUITE}:run_all", world_size, "tcp", timeout=90, group_timeout=30)
    assert len(results) == world_size
    _same_cases(results)
    assert results[0]["check_all_reduce"] > 100


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [5, 6])
def test_suite_odd_and_large_worlds(workers, world_size):
    results = workers(f"{SUITE}:run_all", world_size, "tcp", timeout=110, group_timeout=40)
    _same_cases(results)


def test_gloo_alias_and_plain_tcp_sockets(workers):
    """backend='gloo' runs the tcp backend; TB_TCP_UNIX=0 forces TCP between same-host ranks."""
    names = ["check_all_reduce", "check_broadcast", "check_send_recv", "check_all_to_all"]
    results = workers(f"{SUITE}:run_some", 3, "gloo", names, backend="gloo",
                      env={"TB_TCP_UNIX": "0"}, timeout=90, group_timeout=30)
    _same_cases(results)


def test_env_init(workers):
    """init_method='env://' (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), as under tbrun."""
    results = workers(f"{SUITE}:run_some", 2, "tcp", ["check_barrier", "check_object_collectives"],
                      init="env", timeout=60, group_timeout=30)
    assert len(results) == 2


def _same_cases(results):
    """Every rank ran the same number of cases per check (subgroup checks differ by rank)."""
    strip = [{k: v for k, v in r.items() if k != "check_new_group"} for r in results]
    assert all(r == strip[0] for r in strip), results


@pytest.mark.gpu
def test_cuda_tensors(workers):
    """CuPy-backed tensors go through the tcp backend (staged through host memory)."""
    results = workers(f"{SUITE}:check_cuda", 2, "tcp", timeout=90, group_timeout=30)
    assert results[0] == results[1] == 6
