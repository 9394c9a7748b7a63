"""DistributedSampler: coverage, disjointness, padding, determinism across processes and epochs.

The reference is PyTorch's definition (written out in ``_torch_reference`` below, and checked
against torch itself when it is installed).
"""
import json
import math
import os
import subprocess
import sys

import pytest

from tensorbrain.utils.data.distributed import DistributedSampler

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _torch_reference(n, replicas, rank, drop_last):
    """torch's padding/trimming/striding rule on an unshuffled range (from its source)."""
    if drop_last and n % replicas:
        num = math.ceil((n - replicas) / replicas)
    else:
        num = math.ceil(n / replicas)
    total = num * replicas
    idx = list(range(n))
    if not drop_last:
        pad = total - n
        idx += (idx * math.ceil(pad / n))[:pad] if pad > len(idx) else idx[:pad]
    else:
        idx = idx[:total]
    return idx[rank:total:replicas]


@pytest.mark.parametrize("n", [1, 5, 10, 12, 17])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("drop_last", [False, True])
def test_split_matches_torch_rule(n, replicas, drop_last):
    if drop_last and n < replicas:
        pytest.skip("nothing to give every rank")
    parts = [list(DistributedSampler(range(n), replicas, r, shuffle=False, drop_last=drop_last))
             for r in range(replicas)]
    for r, part in enumerate(parts):
        assert part == _torch_reference(n, replicas, r, drop_last)
        assert len(part) == len(DistributedSampler(range(n), replicas, r, drop_last=drop_last))
    flat = [i for p in parts for i in p]
    if drop_last:
        assert len(set(flat)) == len(flat) == (n // replicas) * replicas  # disjoint, trimmed
    else:
        assert set(flat) == set(range(n))                                 # full coverage
        assert len(flat) == math.ceil(n / replicas) * replicas            # padded by wrapping


def test_shuffle_covers_and_is_disjoint_and_changes_with_epoch():
    n, R = 103, 4
    samplers = [DistributedSampler(range(n), R, r, shuffle=True, seed=7) for r in range(R)]
    orders = []
    for epoch in range(3):
        for s in samplers:
            s.set_epoch(epoch)
        parts = [list(s) for s in samplers]
        flat = [i for p in parts for i in p]
        assert set(flat) == set(range(n)) and len(flat) == 104
        assert len(set(flat)) == n  # only the single padded index repeats
        orders.append(parts)
        assert parts == [list(s) for s in samplers]  # re-iterating the same epoch: same order
    assert orders[0] != orders[1] != orders[2]
    # Without set_epoch the order repeats (the classic pitfall, pytorch#31771): documented.
    s = DistributedSampler(range(n), R, 0, seed=7)
    assert list(s) == list(s)


def test_seed_changes_the_order():
    a = list(DistributedSampler(range(50), 2, 0, seed=0))
    b = list(DistributedSampler(range(50), 2, 0, seed=1))
    assert sorted(a) != a and a != b


_CHILD = """
import json, sys
from tensorbrain.utils.data.distributed import DistributedSampler
rank, R = int(sys.argv[1]), int(sys.argv[2])
s = DistributedSampler(range(37), R, rank, seed=3)
out = []
for epoch in range(3):
    s.set_epoch(epoch)
    out.append(list(s))
print(json.dumps(out))
"""


def test_every_process_computes_the_same_split():
    """Real processes (own hash seeds, own import order) agree on the permutation."""
    R = 3
    env = dict(os.environ, PYTHONPATH=ROOT)
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(r), str(R)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(R)]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            results.append(json.loads(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for epoch in range(3):
        flat = [i for r in range(R) for i in results[r][epoch]]
        assert sorted(set(flat)) == list(range(37)) and len(flat) == 39
        local = [list(DistributedSampler(range(37), R, r, seed=3)) for r in range(R)] if epoch == 0 \
            else None
        if local:
            assert local == [results[r][0] for r in range(R)]
    assert results[0][0] != results[0][1]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
        DistributedSampler(range(5), num_replicas=3, rank=3)
    with pytest.raises(ValueError, match="num_replicas must be >= 1"):
        DistributedSampler(range(5), num_replicas=0, rank=0)


def test_without_group_or_arguments_says_what_to_do():
    try:
        import tensorbrain.distributed as dist
        if dist.is_initialized():
            pytest.skip("a default group is initialized in this process")
    except (ImportError, AttributeError):
        pass
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(5))


def test_matches_torch_when_installed():
    pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TorchDS
    for n, R, drop in [(10, 3, False), (10, 3, True), (4, 3, False)]:
        for r in range(R):
            ours = list(DistributedSampler(range(n), R, r, shuffle=False, drop_last=drop))
            theirs = list(TorchDS(range(n), R, r, shuffle=False, drop_last=drop))
            assert ours == theirs


def test_rank_and_size_come_from_the_process_group():
    """3 real ranks in a process group: disjoint shards covering the data, every epoch."""
    from tensorbrain.testing.distributed import run_workers
    res = run_workers("tests.nn.parallel._ddp_workers:sampler_epochs", 3, timeout=60)
    assert [r["rank"] for r in res] == [0, 1, 2] and all(r["replicas"] == 3 for r in res)
    for epoch in range(3):
        flat = [i for r in res for i in r["epochs"][epoch]]
        assert sorted(set(flat)) == list(range(23)) and len(flat) == 24
        local = [list(DistributedSampler(range(23), 3, r, seed=5)) for r in range(3)] \
            if epoch == 0 else None
        if local:
            assert local == [r["epochs"][0] for r in res]
    assert res[0]["epochs"][0] != res[0]["epochs"][1]


def test_fewer_samples_than_ranks_with_drop_last_warns():
    # every rank got 0 samples silently (torch's behaviour); the counts stay torch's
    with pytest.warns(UserWarning, match=r"drop_last=True with 3 sample\(s\) and 4 replicas "
                                         r"gives every rank 0 samples"):
        s = DistributedSampler(range(3), num_replicas=4, rank=0, drop_last=True)
    assert list(s) == _torch_reference(3, 4, 0, True) == []
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # enough samples, or padding: no warning
        DistributedSampler(range(4), num_replicas=4, rank=0, drop_last=True)
        DistributedSampler(range(3), num_replicas=4, rank=0, drop_last=False)
