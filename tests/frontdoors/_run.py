"""Run a front-door program under tbrun (or one process) and read the weights it saved."""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = os.path.join(ROOT, "tests", "frontdoors", "programs")


def run(prog, *args, nproc=1, cwd=None, timeout=240, env=None, alias=True):
    """Run ``prog`` (a name in programs/, or a path) with the import alias (``alias``) on
    ``nproc`` ranks (tbrun; plain python for one process); return its output, failing with the
    tail of it."""
    script = os.path.join(PROGRAMS, prog)
    if nproc == 1:
        argv = [sys.executable, *(["-m", "tensorbrain.as_torch", "--quiet"] if alias else []),
                script, *args]
    else:
        argv = [sys.executable, "-m", "tensorbrain.distributed.run",
                *(["--as-torch"] if alias else []), "--standalone", "--nproc_per_node",
                str(nproc), script, *args]
    e = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    e.pop("TENSORBRAIN_AS_TORCH", None)
    e.update(env or {})
    out = subprocess.run(argv, cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout)
    text = out.stdout + out.stderr
    assert out.returncode == 0, f"{' '.join(argv)} failed:\n{text[-4000:]}"
    return text


def weights(path):
    """The saved state dict as NumPy arrays."""
    import tensorbrain as tb
    return {k: np.asarray(v._data, dtype=np.float64) for k, v in tb.load(path).items()}


def assert_close(a, b, rtol=1e-5, atol=1e-6):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=rtol, atol=atol, err_msg=k)


def assert_identical(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
