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
#: (2026-11-28, 2 cores: 943 s of the 1,303 s all tests took). The core suites (collectives,
#: shared memory, layers, tensor, autograd, conv) stay in the plain run.
SOAK: dict[str, float] = {
    "tests/as_torch/test_alias.py::test_children_get_the_alias_and_the_test_process_does_not": 3,
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
    "tests/distributed/faults/test_store_preauth.py": 3,
    "tests/distributed/ft/test_elastic.py": 9,
    "tests/distributed/ft/test_local_sgd.py::test_diloco_and_local_sgd_match_two_replicas_in_one_process": 3,
    "tests/distributed/ft/test_manager.py": 57,
    "tests/distributed/ft/test_tbrun.py": 24,
    "tests/distributed/test_api.py": 11,
    "tests/distributed/test_checkpoint.py": 31,
    "tests/distributed/test_checkpoint_state_dict.py": 25,
    "tests/distributed/test_device_mesh.py::test_2x2_mesh_groups_follow_torch_layout": 2,
    "tests/distributed/test_dtensor.py::test_2d_mesh_nested_shards": 3,
    "tests/distributed/test_dtensor.py::test_strided_shard_is_a_tp_chunk_then_a_dp_chunk": 3,
    "tests/distributed/test_dtensor.py::test_total_norm_counts_every_shard_once": 3,
    "tests/distributed/test_fanout_ssh.py": 15,
    "tests/distributed/test_fsdp.py::test_clip_grad_norm_on_dtensor_gradients_is_global": 2,
    "tests/distributed/test_fsdp_compat.py::test_fully_shard_setters_match_one_process": 3,
    "tests/distributed/test_meta_fsdp.py": 2,
    "tests/distributed/test_mpi.py::test_collective_suite_and_mpi_checks_under_mpiexec": 15,
    "tests/distributed/test_mpi.py::test_the_suite_with_the_all_gather_check_or_without_the_fast_path": 4,
    "tests/distributed/test_pipelining.py::test_four_ranks_every_schedule_matches_one_process": 3,
    "tests/distributed/test_pipelining.py::test_mismatches_raise_on_every_rank": 3,
    "tests/distributed/test_pipelining.py::test_pp_x_dp_with_ddp_matches_one_process": 3,
    "tests/distributed/test_run.py::test_a_failure_restarts_every_node": 3,
    "tests/distributed/test_run.py::test_elastic_min_max": 3,
    "tests/distributed/test_run.py::test_missing_node_and_duplicate_node_rank": 4,
    "tests/distributed/test_run.py::test_restart_increments_the_count_and_scopes_rendezvous": 3,
    "tests/distributed/test_run.py::test_the_launcher_page_example_runs_under_tbrun": 2,
    "tests/distributed/test_run_compat.py::test_deepspeed_commands_pass_local_rank_as_deepspeed_does": 2,
    "tests/distributed/test_run_compat.py::test_guides_commands_run_with_the_name_changed": 2,
    "tests/distributed/test_run_torchrun.py::test_a_late_node_triggers_a_new_round_and_the_running_node_restarts_into_it": 4,
    "tests/distributed/test_run_torchrun.py::test_carriage_return_redraws_show_live_with_the_prefix": 3,
    "tests/distributed/test_sequence_parallel.py::test_sequence_parallel_inside_fsdp_matches_one_process": 3,
    "tests/distributed/test_sequence_parallel.py::test_sequence_parallel_transformer_matches_one_process": 2,
    "tests/distributed/test_shaped_link.py": 2,
    "tests/distributed/test_shm_backend.py::test_backend_uses_shared_memory_on_one_host": 2,
    "tests/distributed/test_shm_uneven_hosts.py": 4,
    "tests/distributed/test_slurm_real.py": 27,
    "tests/distributed/test_slurm_submit.py": 25,
    "tests/distributed/test_store.py::test_master_waits_for_workers_and_names_how_many_arrived": 3,
    "tests/distributed/test_tcp_bench.py": 2,
    "tests/distributed/test_tcp_failures.py": 40,
    "tests/distributed/test_tcp_lend.py": 13,
    "tests/distributed/test_tcp_netns.py": 5,
    "tests/distributed/test_tcp_netns_uneven.py": 3,
    "tests/distributed/test_tp_fsdp.py::test_pp_x_dp_with_fsdp_matches_one_process": 5,
    "tests/distributed/test_tp_fsdp.py::test_tp_inside_fsdp_matches_one_process": 11,
    "tests/distributed/test_zero.py::test_matches_one_process_on_full_batch": 5,
    "tests/distributed/test_zero.py::test_state_dict_round_trip_reshards": 5,
    "tests/frontdoors/test_accelerate.py": 20,
    "tests/frontdoors/test_deepspeed.py::test_checkpoint_round_trip_resumes_bit_identically": 5,
    "tests/frontdoors/test_deepspeed.py::test_every_zero_stage_at_two_ranks_matches_one_process": 7,
    "tests/frontdoors/test_deepspeed.py::test_half_precision_stays_finite_and_close": 3,
    "tests/frontdoors/test_deepspeed_16bit.py": 9,
    "tests/frontdoors/test_ezpz.py": 5,
    "tests/frontdoors/test_horovod.py::test_two_ranks_match_one_process_on_the_full_batch": 4,
    "tests/frontdoors/test_idioms.py": 16,
    "tests/frontdoors/test_imports_changed.py": 9,
    "tests/frontdoors/test_real_libraries.py": 54,
    "tests/frontdoors/test_real_torch.py": 3,
    "tests/multiprocessing/test_spawn.py::test_a_child_that_exits_or_dies_is_reported": 3,
    "tests/multiprocessing/test_spawn.py::test_tensors_sent_through_a_queue_arrive_by_handle": 2,
    "tests/nn/parallel/test_ddp.py": 4,
    "tests/nn/parallel/test_examples.py": 14,
    "tests/nn/test_rnn.py": 2,
    "tests/test_docs.py": 84,
    "tests/test_docstring_examples.py": 4,
    "tests/test_example_digits.py::test_runs_as_a_plain_script_with_progress_bar": 3,
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


@pytest.fixture(params=["baseline", "avx2+f16c", "avx512"])
def cpu_path(request):
    """The native module with its loops forced to the scalar ('baseline'), the AVX2 or the
    AVX-512 bodies in turn (skipped where the CPU lacks them); ``auto`` again afterwards."""
    from tensorbrain import _native
    C = _native.module()
    try:
        C._force_cpu_path(request.param)
    except ValueError:
        pytest.skip(f"this CPU cannot run the {request.param} loops")
    yield C
    C._force_cpu_path("auto")
