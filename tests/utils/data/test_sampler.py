"""Samplers: order, lengths, replacement, weights and reproducibility."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.utils.data import (BatchSampler, RandomSampler, SequentialSampler,
                                    SubsetRandomSampler, WeightedRandomSampler)


def test_sequential_and_batch_sampler():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    bs = BatchSampler(SequentialSampler(range(7)), 3, drop_last=False)
    assert list(bs) == [[0, 1, 2], [3, 4, 5], [6]] and len(bs) == 3
    bs = BatchSampler(SequentialSampler(range(7)), 3, drop_last=True)
    assert list(bs) == [[0, 1, 2], [3, 4, 5]] and len(bs) == 2
    with pytest.raises(ValueError, match="batch_size"):
        BatchSampler(range(3), 0, False)


def test_random_sampler_permutation_and_generator():
    a = list(RandomSampler(range(20), generator=tb.Generator().manual_seed(1)))
    b = list(RandomSampler(range(20), generator=tb.Generator().manual_seed(1)))
    assert a == b and sorted(a) == list(range(20)) and a != list(range(20))
    g = tb.Generator().manual_seed(1)
    s = RandomSampler(range(20), generator=g)
    assert list(s) != list(s)  # the generator advances: each epoch differs


def test_random_sampler_num_samples_and_replacement():
    s = RandomSampler(range(5), num_samples=12, generator=tb.Generator().manual_seed(0))
    out = list(s)
    assert len(out) == 12 == len(s)
    assert sorted(out[:5]) == list(range(5)) and sorted(out[5:10]) == list(range(5))
    r = list(RandomSampler(range(3), replacement=True, num_samples=300,
                           generator=tb.Generator().manual_seed(0)))
    assert len(r) == 300 and set(r) == {0, 1, 2}
    with pytest.raises(ValueError, match="num_samples"):
        RandomSampler(range(3), num_samples=0)


def test_subset_random_sampler():
    idx = [10, 20, 30, 40]
    out = list(SubsetRandomSampler(idx, generator=tb.Generator().manual_seed(0)))
    assert sorted(out) == idx and len(SubsetRandomSampler(idx)) == 4


def test_weighted_random_sampler_frequencies():
    s = WeightedRandomSampler([1.0, 0.0, 3.0], 20_000, generator=tb.Generator().manual_seed(0))
    counts = np.bincount(list(s), minlength=3) / 20_000
    assert counts[1] == 0 and counts[2] == pytest.approx(0.75, abs=0.02)
    no_rep = list(WeightedRandomSampler(tb.tensor([1.0, 1.0, 1.0, 1.0]), 4, replacement=False))
    assert sorted(no_rep) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="non-negative"):
        WeightedRandomSampler([-1.0, 1.0], 2)
    with pytest.raises(RuntimeError, match="without replacement"):
        WeightedRandomSampler([1.0, 0.0], 2, replacement=False)
