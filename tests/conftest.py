"""Shared test configuration.

* The ``gpu`` marker skips cleanly on machines without a GPU.
* The ``soak`` tier (:data:`SOAK`): the longest multi-process and end-to-end cases, measured
  with ``--durations``. A plain ``python -m pytest -q`` (the README's test command) leaves them
  out (``addopts = -m "not soak"`` in pyproject.toml) so it stays under 10 minutes on 2 cores;
  ``python -m pytest -q -m soak`` runs only them, and CI (``.ci/run``) runs that as its second
  step, so CI still runs every test. ``-m ""`` runs everything in one go.
"""
import pathlib

import pytest

import tensorbrain as tb

#: Test files, or test node ids (a parametrised test's id without its ``[...]`` covers every
#: case), in the soak tier -> their seconds in a fresh-clone CI run with ``--durations=0``
#: (2026-11-28, 2 cores: 839 s of the 1,303 s all tests took). The core suites (collectives,
#: shared memory, layers, tensor, autograd, conv) stay in the plain run.
SOAK: dict[str, float] = {
    "tests/benchmarks/test_collectives_cli.py::test_check_cost_prints_what_the_always_on_check_costs": 6,
    "tests/benchmarks/test_ft_benchmarks.py": 16,
    "tests/benchmarks/test_limits.py": 10,
    "tests/compat/test_fsdp_programs.py": 35,
    "tests/compat/test_programs.py": 44,
    "tests/distributed/faults/test_init_failure.py": 27,
    "tests/distributed/faults/test_interrupt.py": 27,
    "tests/distributed/faults/test_launch_mistakes.py": 6,
    "tests/distributed/faults/test_mismatch.py": 26,
    "tests/distributed/faults/test_mismatch_more.py": 11,
    "tests/distributed/faults/test_peer_failure.py": 28,
    "tests/distributed/faults/test_shm_attach.py": 11,
    "tests/distributed/ft/test_elastic.py": 9,
    "tests/distributed/ft/test_manager.py": 57,
    "tests/distributed/ft/test_tbrun.py": 24,
    "tests/distributed/test_api.py": 11,
    "tests/distributed/test_checkpoint.py": 31,
    "tests/distributed/test_checkpoint_state_dict.py": 25,
    "tests/distributed/test_fanout_ssh.py": 15,
    "tests/distributed/test_mpi.py::test_collective_suite_and_mpi_checks_under_mpiexec": 15,
    "tests/distributed/test_mpi.py::test_the_suite_with_the_all_gather_check_or_without_the_fast_path": 4,
    "tests/distributed/test_run.py::test_missing_node_and_duplicate_node_rank": 4,
    "tests/distributed/test_run_torchrun.py::test_a_late_node_triggers_a_new_round_and_the_running_node_restarts_into_it": 4,
    "tests/distributed/test_shm_uneven_hosts.py": 4,
    "tests/distributed/test_slurm_real.py": 27,
    "tests/distributed/test_slurm_submit.py": 25,
    "tests/distributed/test_tcp_failures.py::test_killed_peer_is_noticed_at_once": 8,
    "tests/distributed/test_tcp_failures.py::test_mismatch_raises_on_every_rank": 8,
    "tests/distributed/test_tcp_failures.py::test_monitored_barrier_names_missing_rank": 4,
    "tests/distributed/test_tcp_failures.py::test_rank_that_skips_a_collective": 8,
    "tests/distributed/test_tcp_lend.py": 13,
    "tests/distributed/test_tcp_netns.py": 5,
    "tests/distributed/test_tp_fsdp.py::test_pp_x_dp_with_fsdp_matches_one_process": 5,
    "tests/distributed/test_tp_fsdp.py::test_tp_inside_fsdp_matches_one_process": 11,
    "tests/distributed/test_zero.py::test_matches_one_process_on_full_batch": 5,
    "tests/distributed/test_zero.py::test_state_dict_round_trip_reshards": 5,
    "tests/frontdoors/test_accelerate.py": 20,
    "tests/frontdoors/test_deepspeed.py::test_checkpoint_round_trip_resumes_bit_identically": 5,
    "tests/frontdoors/test_deepspeed.py::test_every_zero_stage_at_two_ranks_matches_one_process": 7,
    "tests/frontdoors/test_deepspeed_16bit.py": 9,
    "tests/frontdoors/test_ezpz.py": 5,
    "tests/frontdoors/test_horovod.py::test_two_ranks_match_one_process_on_the_full_batch": 4,
    "tests/frontdoors/test_idioms.py": 16,
    "tests/frontdoors/test_imports_changed.py::test_program_with_imports_changed_matches_one_process": 7,
    "tests/frontdoors/test_real_libraries.py": 54,
    "tests/nn/parallel/test_ddp.py": 4,
    "tests/nn/parallel/test_examples.py": 14,
    "tests/test_docs.py": 84,
    "tests/test_docstring_examples.py": 4,
    "tests/test_native_build.py": 31,
}


def _soak(nodeid: str) -> bool:
    base = nodeid.split("[", 1)[0]
    return nodeid in SOAK or base in SOAK or nodeid.split("::", 1)[0] in SOAK


def _named(config) -> list:
    """The folders, files and node ids named on the command line (``pytest tests/x.py::test_y``,
    ``pytest tests/compat``): a soak test asked for that way runs, it is not left out. A plain
    ``pytest`` (the testpaths of pyproject.toml) names none."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return []
    root = pathlib.Path(config.rootpath).resolve()
    named = []
    for arg in config.args:
        path, _, rest = arg.partition("::")
        try:
            rel = pathlib.Path(path).resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        named.append(f"{rel}::{rest}" if rest else rel)
    return named


def _asked_for(nodeid: str, named: list) -> bool:
    base = nodeid.split("[", 1)[0]
    return any(nodeid == n or base == n or nodeid.startswith(n + "::") or
               nodeid.startswith(n.rstrip("/") + "/") for n in named)


@pytest.hookimpl(tryfirst=True)   # before pytest's own -m selection reads the markers
def pytest_collection_modifyitems(config, items):
    named = _named(config)
    for item in items:
        if _soak(item.nodeid) and not _asked_for(item.nodeid, named):
            item.add_marker(pytest.mark.soak)
    if tb.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"no GPU: {tb.cuda.why_unavailable()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Say that the soak tier was left out, and how to run it."""
    del exitstatus
    left = len(terminalreporter.stats.get("deselected", []))
    if left and config.getoption("markexpr") == "not soak":
        terminalreporter.write_line(f"{left} tests of the soak tier left out "
                                    "(python -m pytest -q -m soak runs them; tests/conftest.py)")
