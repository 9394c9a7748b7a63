"""tb.numa.binding's types against torch.numa.binding's: members, values, fields, equality."""
import dataclasses

import pytest

from tensorbrain.numa import binding


def test_numa_types_match_torch():
    torch_binding = pytest.importorskip("torch.numa.binding")
    assert {m.name: m.value for m in binding.AffinityMode} == \
        {m.name: m.value for m in torch_binding.AffinityMode}
    assert binding.AffinityMode("core-complex") is binding.AffinityMode.CORE_COMPLEX
    assert binding.AffinityMode.NODE == "node" == torch_binding.AffinityMode.NODE
    fields = [(f.name, f.default) for f in dataclasses.fields(binding.NumaOptions)]
    want = [(f.name, f.default) for f in dataclasses.fields(torch_binding.NumaOptions)]
    assert [n for n, _ in fields] == [n for n, _ in want] and fields[1] == want[1]
    opts = binding.NumaOptions(affinity_mode=binding.AffinityMode.EXCLUSIVE)
    topts = torch_binding.NumaOptions(affinity_mode=torch_binding.AffinityMode.EXCLUSIVE)
    assert dataclasses.asdict(opts) == dataclasses.asdict(topts)
    assert repr(opts) == repr(topts)
    for o in (opts, topts):
        with pytest.raises(dataclasses.FrozenInstanceError):
            o.should_fall_back_if_binding_fails = True
    with pytest.raises(ValueError):
        binding.AffinityMode("rack")
