"""Live recovery of the replicated dimension (issue 33's goals), with real processes, real
SIGKILL/SIGSTOP and hard timeouts. Each replica runs ``tests/distributed/ft/replica.py``."""
import os
import random
import signal

import numpy as np
import pytest

from tests.distributed.ft.replica import reference

STEPS, G, SEED = 60, 48, 7


def _steps(log):
    return [e for e in log if "loss" in e]


def _final(log):
    return next(e for e in log if "final" in e)


def test_a_killed_replica_is_replaced_and_the_run_matches_an_unfailed_one(ft_job):
    """3 replicas; one SIGKILLed at a random step. The survivors (same processes) lose at most
    one step and go on at world 2; a replacement joins and the world is back to 3 within 10 s
    of its start; every replica ends with identical weights, at the unfailed run's loss."""
    victim_step = random.Random().randint(6, 14)
    job = ft_job(3, FT_STEPS=STEPS, FT_G=G, FT_SEED=SEED, FT_PAUSE=0.15, FT_TIMEOUT=5)
    for i in range(3):
        job.start(**({"FT_KILL_AT": victim_step} if i == 1 else {}))
    assert job.wait(1, 90) == -signal.SIGKILL, job.stderr(1)
    replacement = job.start()
    for i in (0, 2, replacement):
        assert job.wait(i, 120) == 0, job.stderr(i)
    logs = {i: job.log(i) for i in (0, 2, replacement)}
    for i in (0, 2):
        steps = _steps(logs[i])
        assert logs[i][0]["pid"] == _final(logs[i])["pid"]  # the same process throughout
        failed = [e for e in steps if not e["committed"]]
        assert len(failed) <= 1, (victim_step, failed)
        assert [e["step"] for e in steps if e["committed"]] == list(range(STEPS))
        assert any(e["world"] == 2 for e in steps), steps  # went on without the victim
    start = logs[replacement][0]["start"]
    back = min(e["t"] for e in _steps(logs[0]) if e["world"] == 3 and e["t"] > start)
    assert back - start <= 10.0, f"world back to 3 {back - start:.1f} s after the start"
    finals = [_final(logs[i]) for i in (0, 2, replacement)]
    for f in finals[1:]:
        for a, b in zip(finals[0]["final"], f["final"]):
            assert np.array_equal(np.asarray(a), np.asarray(b))
    ref = reference(STEPS, G, SEED)
    assert abs(finals[0]["full_loss"] - ref) <= 1e-3 * ref + 1e-4, (finals[0]["full_loss"], ref)
    events = " ".join(_final(logs[0])["events"])
    assert "dropped" in events and "died" in events and "admitted" in events, events


def test_a_frozen_replica_is_dropped_at_the_timeout_named_and_rejoins_when_thawed(ft_job):
    """SIGSTOP in step 8: the others drop it at the timeout, naming it as stopped, and go on at
    world 2. SIGCONT later: it finds it was left out, joins again as a newcomer, receives the
    live state, and every replica ends with the same weights."""
    timeout = 3.0
    job = ft_job(3, FT_STEPS=60, FT_G=G, FT_SEED=SEED, FT_PAUSE=0.1, FT_TIMEOUT=timeout)
    for i in range(3):
        job.start(**({"FT_STOP_AT": 8} if i == 1 else {}))
    job.wait_step(0, 16, 90)  # well after the drop
    os.kill(job.procs[1].pid, signal.SIGCONT)
    for i in (0, 1, 2):
        assert job.wait(i, 120) == 0, job.stderr(i)
    victim = job.log(1)[0]["id"]
    for i in (0, 2):
        steps = _steps(job.log(i))
        stuck = next(e for e in steps if e["step"] == 7)   # its last step with the victim
        resumed = next(e for e in steps if e["world"] == 2 and e["committed"])
        assert resumed["t"] - stuck["t"] <= timeout + 3.0, (stuck, resumed)
        assert steps[-1]["world"] == 3, steps  # the thawed replica came back
        events = " ".join(_final(job.log(i))["events"])
        assert f"dropped {victim}" in events and "stopped" in events, events
    assert "left out of round" in " ".join(_final(job.log(1))["events"])
    finals = [_final(job.log(i))["final"] for i in (0, 1, 2)]
    for f in finals[1:]:
        for a, b in zip(finals[0], f):
            assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("bad, named", [({"FT_WIDTH": 17}, "0.weight"),
                                        ({"FT_LR": 0.3}, "'lr'")])
def test_a_foreign_replacement_is_refused_and_the_group_goes_on(ft_job, bad, named):
    job = ft_job(2, FT_STEPS=40, FT_G=G, FT_PAUSE=0.1, FT_TIMEOUT=5)
    job.start(), job.start()
    job.wait_step(0, 5, 60)
    intruder = job.start(**bad)
    assert job.wait(intruder, 60) != 0
    err = job.stderr(intruder)
    assert "Refused" in err and "may not join" in err and named in err, err
    for i in (0, 1):
        assert job.wait(i, 90) == 0, job.stderr(i)
        steps = _steps(job.log(i))
        assert all(e["world"] == 2 and e["committed"] for e in steps), steps
    finals = [_final(job.log(i))["final"] for i in (0, 1)]
    for a, b in zip(*finals):  # started apart (own seeds): round 0 gave them rank 0's weights
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_a_quorum_below_min_replicas_raises_naming_the_missing(ft_job):
    job = ft_job(2, FT_STEPS=40, FT_G=G, FT_PAUSE=0.05, FT_TIMEOUT=3, FT_MIN=2)
    job.start(FT_KILL_AT=6), job.start()
    assert job.wait(1, 90) != 0
    victim = job.log(0)[0]["id"]
    err = job.stderr(1)
    assert "cannot reach min_replicas=2" in err and victim in err and "died" in err, err


def test_replica_groups_of_two_processes_survive_a_kill_on_the_replicate_dimension(ft_job):
    """2 replica groups x 2 shard processes (ZeRO-3-like sharding inside a group, the replicate
    dimension across). One process of group b dies: group b is dropped whole (its other process
    is left out and asks again), group a goes on alone; a replacement makes group b whole again,
    it is admitted and both its processes receive their shard's state from group a."""
    module = "tests.distributed.ft.sharded_replica"
    job = ft_job(4, FT_STEPS=STEPS, FT_G=G, FT_SEED=SEED, FT_PAUSE=0.15, FT_TIMEOUT=5)
    for group, rank in (("a", 0), ("a", 1), ("b", 0), ("b", 1)):
        job.start(module, FT_GROUP=group, FT_GROUP_RANK=rank,
                  **({"FT_KILL_AT": 10} if (group, rank) == ("b", 0) else {}))
    assert job.wait(2, 90) == -signal.SIGKILL, job.stderr(2)
    replacement = job.start(module, FT_GROUP="b", FT_GROUP_RANK=0)
    for i in (0, 1, 3, replacement):
        assert job.wait(i, 150) == 0, job.stderr(i)
    steps = _steps(job.log(0))
    assert [e["step"] for e in steps if e["committed"]] == list(range(STEPS))
    assert {e["replicas"] for e in steps} == {1, 2} and steps[-1]["replicas"] == 2, steps
    assert len([e for e in steps if not e["committed"]]) <= 1
    finals = {i: np.asarray(_final(job.log(i))["final"]) for i in (0, 1, 3, replacement)}
    assert np.array_equal(finals[0], finals[replacement])  # shard 0 of groups a and b
    assert np.array_equal(finals[1], finals[3])            # shard 1 of groups a and b
    assert "left out of round" in " ".join(_final(job.log(3))["events"])
    # the whole model (both shards) reaches the loss of one process on the whole batch
    from tests.distributed.ft.replica import data, model
    net = model(16, SEED)
    full = np.concatenate([finals[0], finals[1]])
    at = 0
    for p in net.parameters():
        p._data[...] = full[at:at + p.numel()].reshape(p.shape)
        at += p.numel()
    x, y = data()
    import tensorbrain as tb
    loss = float(tb.nn.functional.cross_entropy(net(tb.tensor(x)), tb.tensor(y)).item())
    ref = reference(STEPS, G, SEED)
    assert abs(loss - ref) <= 1e-3 * ref + 1e-4, (loss, ref)
