"""Programs that change only the front door's import and keep the real ``import torch`` stop
with a message saying what to change (before, ``Accelerator.prepare`` handed the real
PyTorch's model back unwrapped and every rank trained alone); and a Horovod program launched
with horovodrun's ``-np -H`` form matches one process."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from ._run import PROGRAMS, ROOT, assert_close, run, weights

pytestmark = pytest.mark.timeout(300)

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="the real PyTorch is not installed")

HEAD = """
import numpy as np
import torch
x = torch.tensor(np.ones((8, 3), np.float32))
model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""

PROGRAMS_WITH_REAL_TORCH = {
    "accelerate": """
from tensorbrain.accelerate import Accelerator
accelerator = Accelerator(cpu=True)
model, optimizer = accelerator.prepare(model, optimizer)
""",
    "deepspeed": """
import tensorbrain.deepspeed as deepspeed
deepspeed.init_distributed()
engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                  config={"train_batch_size": 2,
                                          "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})
""",
    "horovod": """
import tensorbrain.horovod as hvd
hvd.init()
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
""",
    "ddp": """
import tensorbrain.distributed as dist
from tensorbrain.nn.parallel import DistributedDataParallel
dist.init_process_group("tcp")
DistributedDataParallel(model)
""",
}


def _tbrun(*argv_tail):
    argv = [sys.executable, "-m", "tensorbrain.distributed.run", *argv_tail]
    e = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    e.pop("TENSORBRAIN_AS_TORCH", None)
    return subprocess.run(argv, env=e, capture_output=True, text=True, timeout=240)


@needs_torch
@pytest.mark.parametrize("door", sorted(PROGRAMS_WITH_REAL_TORCH))
def test_real_torch_objects_are_refused_with_what_to_change(tmp_path, door):
    path = tmp_path / f"{door}.py"
    path.write_text(textwrap.dedent(HEAD) + textwrap.dedent(PROGRAMS_WITH_REAL_TORCH[door]))
    out = _tbrun("--standalone", "--nproc_per_node", "2", str(path))
    text = out.stdout + out.stderr
    assert out.returncode == 1, text[-3000:]
    assert "an object of the real PyTorch" in text, text[-3000:]
    assert "import tensorbrain as torch" in text and "--as-torch" in text


@needs_torch
def test_ezpz_warns_when_the_real_torch_is_imported(tmp_path):
    path = tmp_path / "ezpz_real.py"
    path.write_text("import torch\nimport tensorbrain.ezpz as ezpz\nezpz.setup()\n"
                    "ezpz.cleanup()\n")
    out = _tbrun("--standalone", "--nproc_per_node", "2", str(path))
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    assert "UserWarning: tensorbrain.ezpz: the real PyTorch is imported" in text, text[-3000:]


def test_horovod_program_under_horovodruns_np_h_form_matches_one_process(tmp_path):
    run("horovod_train.py", "--lr", "0.1", "--batch", "16", "--out", str(tmp_path / "one.st"))
    out = _tbrun("--as-torch", "-np", "2", "-H", "localhost:2", "python",
                 os.path.join(PROGRAMS, "horovod_train.py"), "--lr", "0.05", "--batch", "8",
                 "--out", str(tmp_path / "two.st"))
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "(ranks 0..1 of 2)" in out.stderr + out.stdout
    assert_close(weights(tmp_path / "one.st"), weights(tmp_path / "two.st"))
