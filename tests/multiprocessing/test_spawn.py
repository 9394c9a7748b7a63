"""tensorbrain.multiprocessing: spawn, failures that leave nothing running, shared tensors.

Every case runs its parent in a fresh interpreter under a hard timeout, as a user's script would.
"""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(body, timeout=120):
    code = "import tensorbrain as tb, tensorbrain.multiprocessing as mp\n" \
           "from tests.multiprocessing import _workers as W\n" \
           "if __name__ == '__main__':\n" + textwrap.indent(textwrap.dedent(body), "    ")
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is not running
        return f.read().split()[2] != "Z"


def test_children_write_into_the_parents_shared_model():
    out = _run("""
        m = tb.nn.Linear(3, 2)
        m.share_memory()
        before = m.weight.detach().clone()
        flag = tb.zeros(1)
        mp.spawn(W.add_rank, args=(m, flag), nprocs=2)
        delta = [[round(v, 4) for v in row] for row in (m.weight - before).tolist()]
        print(delta, flag.tolist(), m.weight.is_shared())
    """)
    assert out.split("\n")[0] == "[[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]] [1.0] True"


def test_hogwild_training_lowers_the_shared_models_loss():
    out = _run("""
        tb.manual_seed(0)
        x = tb.randn(64, 4)
        y = x @ tb.tensor([[1.0], [-2.0], [0.5], [3.0]])
        m = tb.nn.Linear(4, 1)
        m.share_memory()
        loss0 = tb.nn.functional.mse_loss(m(x), y).item()
        mp.spawn(W.hogwild, args=(m, x, y, 50), nprocs=2)
        print(loss0, tb.nn.functional.mse_loss(m(x), y).item())
    """)
    loss0, loss1 = map(float, out.split())
    assert loss1 < 0.05 * loss0


def test_a_raising_child_ends_the_others_and_names_itself(tmp_path):
    out = _run(f"""
        import time
        t = time.time()
        try:
            mp.spawn(W.fail_one, args=({str(tmp_path / 'pid')!r},), nprocs=3)
        except mp.ProcessRaisedException as e:
            print(e.error_index, time.time() - t < 60, "ValueError: boom in child 1" in str(e))
    """)
    assert out.split("\n")[0] == "1 True True"
    pids = [int((tmp_path / f"pid.{i}").read_text()) for i in range(3)]
    assert not any(_alive(p) for p in pids)


@pytest.mark.parametrize("fn,want", [("exit_code", "0 3 None"), ("killed", "1 -9 SIGKILL")])
def test_a_child_that_exits_or_dies_is_reported(fn, want):
    out = _run(f"""
        try:
            mp.spawn(W.{fn}, nprocs=2)
        except mp.ProcessExitedException as e:
            print(e.error_index, e.exit_code, e.signal_name)
    """)
    assert out.split("\n")[0] == want


def test_join_false_returns_the_context():
    out = _run("""
        m = tb.nn.Linear(2, 2)
        ctx = mp.spawn(W.add_rank, args=(m, tb.zeros(1)), nprocs=2, join=False)
        assert len(ctx.pids()) == 2
        while not ctx.join():
            pass
        print("joined")
    """)
    assert "joined" in out


def test_tensors_sent_through_a_queue_arrive_by_handle():
    out = _run("""
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        pc = mp.spawn(W.put_tensor, args=(q,), nprocs=1, join=False)
        t = q.get(timeout=60)
        assert q.get(timeout=60) is None
        print(t.shape[0], float(t.sum()), t.is_shared())
        pc.join()
    """)
    assert out.split("\n")[0] == "1000 1000.0 True"


def test_only_a_small_handle_is_pickled_and_no_segment_is_left():
    before = {f for f in os.listdir("/dev/shm") if f.startswith("tb_shm_")}
    out = _run("""
        from multiprocessing.reduction import ForkingPickler
        big = tb.randn(1_000_000)
        data = bytes(ForkingPickler.dumps(big))
        back = __import__("pickle").loads(data)
        back[0] = 123.0
        print(len(data) < 1000, big.is_shared(), float(big[0]))
    """)
    assert out.split("\n")[0] == "True True 123.0"
    assert {f for f in os.listdir("/dev/shm") if f.startswith("tb_shm_")} <= before


def test_reexports_and_sharing_strategy():
    import multiprocessing

    import tensorbrain.multiprocessing as mp
    assert mp.Process is multiprocessing.Process and mp.cpu_count() >= 1
    assert callable(mp.get_context) and callable(mp.set_start_method) and mp.Queue
    assert mp.get_sharing_strategy() == "file_system"
    with pytest.raises(ValueError, match="not supported"):
        mp.set_sharing_strategy("file_descriptor")
