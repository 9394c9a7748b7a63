"""Complete PyTorch programs (tests/compat/programs, written in torch's idioms) run unchanged on
TensorBrain through the import alias, and reach the loss real torch reaches.

Each program prints ``FINAL_LOSS <x>``. It runs under ``python -m tensorbrain.as_torch`` (or
``tbrun --as-torch``); when torch is installed the same command line runs it under torch
(``python`` / ``python -m torch.distributed.run``) and the two final losses are compared. Programs
whose start and data order are fixed (deterministic weights from NumPy, no shuffling) must agree
closely; those that use each framework's own random numbers (default init, dropout, shuffled
sampling, hogwild races) must agree within the spread such runs have.
"""
import os
import re
import socket
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = os.path.join(ROOT, "tests", "compat", "programs")
TIMEOUT = 400


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# torch's own flake, in the reference run only: a worker of a 2-rank torch.distributed.run job
# sometimes aborts while it tears its process group down ("terminate called without an active
# exception", exit -6) after the program has printed its FINAL_LOSS (2 of about 60 reference runs
# on 2026-11-26). That output is still the reference's result, so it is used; without a
# FINAL_LOSS line the run fails as any other. TensorBrain's runs get no such allowance.
_TORCH_TEARDOWN_ABORT = "terminate called without an active exception"


def _run(argv, tmp_path, framework):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    env.pop("TENSORBRAIN_AS_TORCH", None)
    out = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=TIMEOUT)
    text = out.stdout + out.stderr
    if (framework == "torch" and out.returncode != 0 and _TORCH_TEARDOWN_ABORT in text
            and "FINAL_LOSS" in text):
        return text
    assert out.returncode == 0, f"{framework}: {' '.join(argv)} failed:\n{text[-4000:]}"
    return text


def _final(text):
    found = re.findall(r"FINAL_LOSS (\S+)", text)
    assert found, f"no FINAL_LOSS line in:\n{text[-3000:]}"
    return float(found[-1])


def _python(framework, prog, *args):
    script = os.path.join(PROGRAMS, prog)
    if framework == "tb":
        return [sys.executable, "-m", "tensorbrain.as_torch", script, *args]
    return [sys.executable, script, *args]


def _launcher(framework, launch, prog, *args):
    script = os.path.join(PROGRAMS, prog)
    if framework == "tb":
        return [sys.executable, "-m", "tensorbrain.distributed.run", "--as-torch", *launch,
                script, *args]
    return [sys.executable, "-m", "torch.distributed.run", *launch, script, *args]


def _standalone():
    return ["--standalone", "--nproc_per_node", "2"]


def _c10d():
    return ["--nnodes", "1", "--nproc_per_node", "2", "--rdzv-id", "456", "--rdzv-backend", "c10d",
            f"--rdzv-endpoint=127.0.0.1:{_port()}"]


def _two_launches(framework, tmp_path, launch, prog):
    """Run 3 of 6 epochs, stop, launch again: the job resumes from its snapshot."""
    snap = str(tmp_path / f"{framework}-snapshot.pt")
    first = _run(_launcher(framework, launch(), prog, "6", "2", "--snapshot", snap,
                           "--stop_after", "3"), tmp_path, framework)
    assert "snapshot saved" in first
    second = _run(_launcher(framework, launch(), prog, "6", "2", "--snapshot", snap),
                  tmp_path, framework)
    assert "Resuming training from snapshot at Epoch 3" in second
    return second


# name -> (how to run it, relative tolerance of the torch comparison, absolute tolerance)
CASES = {
    # random init, dropout and shuffling differ between the frameworks: measured here, the two
    # frameworks' final losses differed by 0.01-0.11 depending on the epoch count
    "mnist_cnn": (lambda fw, tmp: _run(_python(fw, "mnist_cnn.py", "--epochs", "5"), tmp, fw),
                  0.0, 0.2),
    "hogwild": (lambda fw, tmp: _run(_python(fw, "hogwild.py"), tmp, fw), 0.0, 0.2),
    "ddp_single": (lambda fw, tmp: _run(_python(fw, "ddp_single.py", "5", "2", "--checkpoint",
                                                str(tmp / f"{fw}.pt")), tmp, fw), 1e-3, 1e-5),
    "ddp_spawn": (lambda fw, tmp: _run(_python(fw, "ddp_spawn.py", "5", "--port", str(_port())),
                                       tmp, fw), 0.15, 0.0),
    "ddp_torchrun": (lambda fw, tmp: _two_launches(fw, tmp, _standalone, "ddp_torchrun.py"),
                     0.15, 0.0),
    "ddp_multinode_c10d": (lambda fw, tmp: _two_launches(fw, tmp, _c10d, "ddp_torchrun.py"),
                           0.15, 0.0),
    "dist_p2p": (lambda fw, tmp: _run(_python(fw, "dist_p2p.py", str(_port())), tmp, fw), 0.0, 0.0),
    "dist_sync_sgd": (lambda fw, tmp: _run(_python(fw, "dist_sync_sgd.py", str(_port())), tmp, fw),
                      1e-3, 1e-5),
    "regression": (lambda fw, tmp: _run(_python(fw, "regression.py"), tmp, fw), 0.02, 2e-5),
    "checkpoint_fileobj": (lambda fw, tmp: _run(_python(fw, "checkpoint_fileobj.py"), tmp, fw),
                           1e-3, 1e-5),
    # weights from NumPy, no dropout, batches drawn with NumPy: measured equal to 6 digits
    "nanogpt_char": (lambda fw, tmp: _run(_python(fw, "nanogpt_char.py", "--deterministic=True"),
                                          tmp, fw), 1e-3, 1e-5),
    "word_lm": (lambda fw, tmp: _run(_python(fw, "word_lm.py", "--deterministic", "--dropout", "0"),
                                     tmp, fw), 1e-3, 1e-5),
    # issue 29's list: legacy typed classes and sparse COO (a GCN), and complex rotary
    # embeddings, torch.compile, fused AdamW, memory queries, random fills (a tiny LLaMA);
    # weights from NumPy: measured equal to 6 digits. torch.compile's backend is "eager" for
    # the reference run's sake (inductor compiles C++ for minutes on this machine).
    "gcn_sparse": (lambda fw, tmp: _run(_python(fw, "gcn_sparse.py", "--deterministic"), tmp, fw),
                   1e-4, 1e-6),
    "llama_rotary": (lambda fw, tmp: _run(_python(fw, "llama_rotary.py", "--deterministic",
                                                  "--backend", "eager"), tmp, fw), 1e-4, 1e-6),
    # issue 29's refusals made real: a custom_op with register_autograd, CSR sparse.mm, nested
    # tensors padded; weights from NumPy: measured equal to 6 digits
    "custom_op_ragged": (lambda fw, tmp: _run(_python(fw, "custom_op_ragged.py"), tmp, fw),
                         1e-4, 1e-6),
    # 2 ranks; each program also trains the unsplit model in one process and fails unless every
    # parameter matches it (1e-4); NumPy-set weights, so torch's final loss must match too
    "pipelining_gpipe": (lambda fw, tmp: _run(_launcher(fw, _standalone(), "pipelining_manual.py",
                                                        "gpipe"), tmp, fw), 1e-4, 1e-6),
    "pipelining_1f1b": (lambda fw, tmp: _run(_launcher(fw, _standalone(), "pipelining_manual.py",
                                                       "1f1b"), tmp, fw), 1e-4, 1e-6),
    "tensor_parallel": (lambda fw, tmp: _run(_launcher(fw, _standalone(), "tensor_parallel.py"),
                                             tmp, fw), 1e-4, 1e-6),
    "sequence_parallel": (lambda fw, tmp: _run(_launcher(fw, _standalone(), "tensor_parallel.py",
                                                         "--sequence-parallel"), tmp, fw),
                          1e-4, 1e-6),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_program_runs_on_tensorbrain_and_matches_torch(name, tmp_path):
    run, rtol, atol = CASES[name]
    text = run("tb", tmp_path)
    assert "tensorbrain.as_torch: `import torch` runs TensorBrain" in text  # said once, at start
    assert text.count("`import torch` runs TensorBrain") == 1
    ours = _final(text)
    assert ours == ours and ours < 10  # finite and trained
    pytest.importorskip("torch")
    theirs = _final(run("torch", tmp_path))
    print(f"\n{name}: tensorbrain {ours:.6f} torch {theirs:.6f}")  # the figures in docs/compat.md
    assert ours == pytest.approx(theirs, rel=rtol, abs=atol), f"{name}: tb {ours} vs torch {theirs}"
