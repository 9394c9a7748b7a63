"""tensorbrain.ezpz: an ezpz-style program (tests/frontdoors/programs) run unchanged under
tbrun --as-torch at 2 ranks, with each of ezpz's backends, ends with the weights one process
reaches on the full batch."""
import logging

import pytest

import tensorbrain.ezpz as ezpz

from ._run import assert_close, run, weights

PROG = "ezpz_train.py"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ezpz_ref")
    text = run(PROG, "--batch", "16", "--out", str(tmp / "one.st"))
    assert "rank 0 of 1 on cpu (gloo)" in text
    return weights(tmp / "one.st")


@pytest.mark.parametrize("backend", ["DDP", "deepspeed", "horovod"])
def test_two_ranks_match_one_process(tmp_path, reference, backend):
    text = run(PROG, "--backend", backend, "--batch", "8", "--out", str(tmp_path / "two.st"),
               nproc=2)
    assert "rank 0 of 2 on cpu (gloo)" in text
    assert text.count("`train_step`() took: dt=") == 6      # logged on rank 0 only
    assert_close(reference, weights(tmp_path / "two.st"))


def test_helpers_without_a_launcher(caplog, monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    assert ezpz.get_torch_device() == "cpu" and ezpz.get_torch_backend() == "gloo"
    assert (ezpz.get_rank(), ezpz.get_world_size(), ezpz.get_local_rank()) == (0, 1, 0)
    with pytest.raises(ValueError, match="tensorflow"):
        ezpz.setup(framework="tensorflow")
    with pytest.raises(ValueError, match="'mpi'"):
        ezpz.setup(backend="mpi")

    @ezpz.timeitlogit(rank=1)
    def quiet(a):
        return a + 1

    @ezpz.timeitlogit(rank=0)
    def loud(a):
        return a + 1

    with caplog.at_level(logging.INFO, logger="ezpz"):
        assert quiet(1) == 2 and loud(2) == 3
    assert [r.getMessage().split(" took")[0] for r in caplog.records] == ["`loud`(2)"]


def test_get_logger_speaks_on_rank_zero_and_dist_helpers(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("LOG_FROM_ALL_RANKS", raising=False)
    monkeypatch.delenv("EZPZ_LOG_LEVEL", raising=False)
    monkeypatch.delenv("LOG_LEVEL", raising=False)
    assert ezpz.get_logger("t0", rank=0).level == logging.INFO
    assert ezpz.get_logger("t1", rank=1).level == logging.CRITICAL
    assert ezpz.get_logger("t1", rank=1, rank_zero_only=False).level == logging.INFO
    monkeypatch.setenv("LOG_FROM_ALL_RANKS", "1")
    assert ezpz.get_logger("t2", rank=3).level == logging.INFO
    assert ezpz.summarize_dict({"iter": 2, "loss": 0.25}) == "iter=2 loss=0.250000"
    assert callable(ezpz.dist.wrap_model_for_ddp) and ezpz.dist.setup_torch is ezpz.setup_torch
    info = ezpz.get_dist_info()
    assert (info["RANK"], info["WORLD_SIZE"], info["DEVICE"]) == (0, 1, ezpz.get_torch_device())
