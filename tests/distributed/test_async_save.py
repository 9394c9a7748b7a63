"""dcp.async_save on two real processes: the training loop's all_reduces go on while the
checkpoint is written in the background (its own process group); the checkpoint holds the
state as it was when async_save was called, and loads back."""
import numpy as np
import pytest

from tensorbrain.distributed.launcher.api import LaunchConfig, elastic_launch


def _train_and_save(path):
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    import tensorbrain.distributed.checkpoint as dcp
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    w = tb.full((1000,), float(rank + 1))
    fut = dcp.async_save({"w": w, "step": 3}, checkpoint_id=path)
    for _ in range(20):   # training goes on: collectives on the default group, w changes
        t = tb.ones(8)
        dist.all_reduce(t)
        w.add_(1.0)
    fut.result(timeout=60)
    out = {"w": tb.zeros(1000), "step": 0}
    dcp.load(out, checkpoint_id=path)
    dist.barrier()
    dist.destroy_process_group()
    return out["w"].numpy()[:3].tolist(), out["step"], t.tolist()[0]


@pytest.mark.timeout(120)
def test_async_save_while_training(tmp_path):
    out = elastic_launch(LaunchConfig(1, 1, 2, max_restarts=0), _train_and_save)(str(tmp_path))
    # a plain tensor is taken as replicated: rank 0's copy is written, as it was at the call
    for rank in (0, 1):
        np.testing.assert_array_equal(out[rank][0], [1.0, 1.0, 1.0])
        assert out[rank][1] == 3 and out[rank][2] == 2.0


def test_async_save_refuses_process_and_returns_a_response(tmp_path):
    import tensorbrain as tb
    import tensorbrain.distributed.checkpoint as dcp
    from tensorbrain.distributed.checkpoint.staging import DefaultStager
    from tensorbrain.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType
    with pytest.raises(NotImplementedError, match="PROCESS"):
        dcp.async_save({}, checkpoint_id=str(tmp_path), no_dist=True,
                       async_checkpointer_type=AsyncCheckpointerType.PROCESS)
    w = tb.ones(3)
    resp = dcp.async_save({"w": w}, checkpoint_id=str(tmp_path), no_dist=True,
                          async_stager=DefaultStager())
    w.mul_(5)   # after staging: the checkpoint keeps the ones
    resp.staging_completion.result()
    resp.upload_completion.result(timeout=60)
    out = {"w": tb.zeros(3)}
    dcp.load(out, checkpoint_id=str(tmp_path), no_dist=True)
    assert out["w"].tolist() == [1.0, 1.0, 1.0]
