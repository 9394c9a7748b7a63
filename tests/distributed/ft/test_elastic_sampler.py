"""``ElasticSampler`` (Horovod's semantics): the epoch's indices split over the live ranks,
what was processed remembered, and a reset re-splits only what is left."""
import numpy as np

from tensorbrain.distributed.elastic import ElasticSampler

HERE = "tests.distributed.ft.test_elastic_sampler"


def test_one_process_takes_the_whole_epoch_in_the_seeded_order():
    s = ElasticSampler(range(10), shuffle=True, seed=3)
    perm = np.random.default_rng(3).permutation(10).tolist()
    assert list(s) == perm and len(s) == 10
    s.record_batch(0, 4)
    s.reset()
    assert list(s) == perm[4:] and len(s) == 6
    s.set_epoch(1)
    assert list(s) == np.random.default_rng(4).permutation(10).tolist()


def split_worker(rank, world):
    s = ElasticSampler(range(11), shuffle=False)
    mine = list(s)
    s.record_batch(0, 2)  # each rank processed its first 2
    s._sync()             # what TorchState.sync does: unite the processed indices, re-split
    return {"first": mine, "after": list(s), "n": len(s)}


def test_two_ranks_split_then_re_split_what_is_left(workers):
    a, b = workers(f"{HERE}:split_worker", 2)
    assert a["first"] == list(range(0, 11, 2)) and b["first"] == [1, 3, 5, 7, 9, 0]  # padded
    done = {0, 2, 1, 3}
    left = [i for i in range(11) if i not in done]
    assert a["after"] == left[0::2] and b["after"] == (left + left[:1])[1::2]
    assert a["n"] == b["n"] == 4
