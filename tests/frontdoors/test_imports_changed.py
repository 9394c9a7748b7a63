"""The four front-door programs with only their imports changed (``torch`` -> ``tensorbrain``,
``accelerate`` -> ``tensorbrain.accelerate``, ...) run under plain tbrun (no import alias) at 2
ranks and end with the weights the same program reaches in one process."""
import os
import re

import pytest

from ._run import PROGRAMS, assert_close, run, weights

pytestmark = pytest.mark.timeout(300)

REWRITES = [(r"^(\s*)import horovod\.torch as hvd$", r"\1import tensorbrain.horovod as hvd"),
            (r"^import (deepspeed|ezpz)$", r"import tensorbrain.\1 as \1"),
            (r"^import deepspeed\.(\S+) as", r"import tensorbrain.deepspeed.\1 as"),
            (r"^from (accelerate|deepspeed|ezpz)(\S*) import", r"from tensorbrain.\1\2 import"),
            (r"^import torch$", "import tensorbrain as torch"),
            (r"^import torch\.(\S+) as", r"import tensorbrain.\1 as"),
            (r"^import torch\.(\S+)$", r"import tensorbrain.\1"),
            (r"^from torch(\S*) import", r"from tensorbrain\1 import")]


def _rewrite(name, folder):
    with open(os.path.join(PROGRAMS, name)) as f:
        text = f.read()
    for pattern, repl in REWRITES:
        text = re.sub(pattern, repl, text, flags=re.M)
    assert not re.search(r"^\s*(import|from) (torch|accelerate|deepspeed|horovod|ezpz)\b", text,
                         flags=re.M)
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(text)
    return path


CASES = {"accelerate_train.py": (["--batch", "16"], ["--batch", "8"]),
         "horovod_train.py": (["--lr", "0.1", "--batch", "16"], ["--lr", "0.05", "--batch", "8"]),
         "ezpz_train.py": (["--batch", "16"], ["--batch", "8"])}


@pytest.mark.parametrize("name", sorted(CASES))
def test_program_with_imports_changed_matches_one_process(tmp_path, name):
    one_args, two_args = CASES[name]
    run(name, *one_args, "--out", str(tmp_path / "one.st"))            # with the alias
    path = _rewrite(name, str(tmp_path))
    run(path, *two_args, "--out", str(tmp_path / "two.st"), nproc=2, alias=False)
    assert_close(weights(tmp_path / "one.st"), weights(tmp_path / "two.st"))


def test_deepspeed_program_with_imports_changed(tmp_path):
    import json

    import numpy as np

    import tensorbrain as tb
    cfgs = {}
    for world in (1, 2):
        cfgs[world] = tmp_path / f"ds{world}.json"
        cfgs[world].write_text(json.dumps({
            "train_batch_size": 16, "train_micro_batch_size_per_gpu": 16 // world,
            "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
            "zero_optimization": {"stage": 2}}))
    run("deepspeed_train.py", "--deepspeed_config", str(cfgs[1]), "--save-dir",
        str(tmp_path / "one"))
    path = _rewrite("deepspeed_train.py", str(tmp_path))
    run(path, "--deepspeed_config", str(cfgs[2]), "--save-dir", str(tmp_path / "two"), nproc=2,
        alias=False)

    def load(d):
        state = tb.load(os.path.join(d, "final", "mp_rank_00_model_states.safetensors"))
        return {k: np.asarray(v._data, dtype=np.float64) for k, v in state["module"].items()}
    assert_close(load(str(tmp_path / "one")), load(str(tmp_path / "two")), rtol=1e-4, atol=1e-5)
