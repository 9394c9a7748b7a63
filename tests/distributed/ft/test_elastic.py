"""Horovod Elastic's API (``hvd.elastic.run``, ``TorchState``, ``commit``/``restore``) on live
recovery: a Horovod program keeps training when a process is SIGKILLed and takes in a new one
at a commit. Real processes (``hvd_replica.py``) against a store the test serves, as under
``tbrun --fault_tolerant`` (``TB_FAULT_TOLERANT=1``)."""
import signal

import numpy as np

from tests.distributed.ft.replica import reference

STEPS, G, SEED = 40, 48, 7
MODULE = "tests.distributed.ft.hvd_replica"


def test_hvd_elastic_survives_a_kill_and_admits_a_new_process(ft_job):
    job = ft_job(3, FT_STEPS=STEPS, FT_G=G, FT_SEED=SEED, FT_PAUSE=0.15, FT_COMMIT=4,
                 TB_FAULT_TOLERANT=1, TB_FT_TIMEOUT=5)
    for i in range(3):
        job.start(MODULE, **({"FT_KILL_AT": 10} if i == 2 else {}))
    assert job.wait(2, 90) == -signal.SIGKILL, job.stderr(2)
    newcomer = job.start(MODULE)
    for i in (0, 1, newcomer):
        assert job.wait(i, 120) == 0, job.stderr(i)
    finals = [next(e for e in job.log(i) if "final" in e) for i in (0, 1, newcomer)]
    for f in finals[1:]:
        for a, b in zip(finals[0]["final"], f["final"]):
            assert np.array_equal(np.asarray(a), np.asarray(b))
    # survivors: restored to the commit before step 10 (step 8), went on at 2, then back at 3
    steps = [e for e in job.log(0) if "loss" in e]
    assert [e["step"] for e in steps].count(8) == 2 and [e["step"] for e in steps].count(9) == 2
    assert {e["world"] for e in steps} == {2, 3}, steps
    assert finals[0]["resets"][:2] == [2, 3], finals[0]
    ref = reference(STEPS, G, SEED)
    assert abs(finals[0]["full_loss"] - ref) <= 1e-3 * ref + 1e-4, (finals[0]["full_loss"], ref)
