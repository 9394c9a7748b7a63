"""python -m tensorbrain.as_torch: the alias, its reach into child processes, and its errors."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(tmp_path, source, *args, timeout=180):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("TENSORBRAIN_AS_TORCH", None)
    return subprocess.run([sys.executable, "-m", "tensorbrain.as_torch", str(script), *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


def test_torch_and_its_submodules_are_tensorbrains(tmp_path):
    out = _run(tmp_path, """
        import sys
        import torch, torch.nn as nn, torch.nn.functional as F, torch.optim, torch.distributed as dist
        import torch.utils.data, torch.multiprocessing, torch.backends.cudnn
        from torch.utils.data.distributed import DistributedSampler
        import tensorbrain
        assert torch is tensorbrain and nn is tensorbrain.nn and F is tensorbrain.nn.functional
        assert dist is tensorbrain.distributed and torch.utils.data is tensorbrain.utils.data
        assert tensorbrain.__spec__.name == "tensorbrain"   # the real module keeps its own spec
        print(sys.argv[1:], torch.tensor([1.0]).tolist())
    """, "--flag", "x")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['--flag', 'x'] [1.0]"
    assert out.stderr.count("`import torch` runs TensorBrain") == 1


def test_a_missing_attribute_is_named_as_a_tensorbrain_gap(tmp_path):
    out = _run(tmp_path, "import torch\ntorch.nn.NoSuchLayer\n")
    assert out.returncode == 1
    assert "module 'torch.nn' has no attribute 'NoSuchLayer'" in out.stderr
    assert "gap in TensorBrain's PyTorch compatibility, not an error in your program" in out.stderr


def test_a_missing_tensor_method_is_named_as_a_gap(tmp_path):
    out = _run(tmp_path, "import torch\ntorch.ones(2).no_such_method()\n")
    assert "'Tensor' object has no attribute 'no_such_method'" in out.stderr
    assert "gap in TensorBrain's PyTorch compatibility" in out.stderr


def test_a_missing_submodule_and_from_import_say_so_too(tmp_path):
    out = _run(tmp_path, "import torch.no_such_module\n")
    assert "No module named 'torch.no_such_module'" in out.stderr and "gap" in out.stderr
    out = _run(tmp_path, "from torch.nn import NoSuchLayer\n")
    assert "cannot import name 'NoSuchLayer'" in out.stderr
    assert "gap in TensorBrain" in out.stderr


def test_children_get_the_alias_and_the_test_process_does_not(tmp_path):
    out = _run(tmp_path, """
        import subprocess, sys
        import torch.multiprocessing as mp

        def child(i, t):
            import torch
            t[i] = float(torch.__name__ == "tensorbrain")

        if __name__ == "__main__":
            import torch
            t = torch.zeros(2)
            mp.spawn(child, args=(t,), nprocs=2)
            code = "import torch; print(torch.__name__)"
            print(t.tolist(), subprocess.check_output([sys.executable, "-c", code], text=True).strip())
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1.0, 1.0] tensorbrain"
    assert "TENSORBRAIN_AS_TORCH" not in os.environ


def test_a_gap_inside_a_spawned_child_is_reported_as_one(tmp_path):
    out = _run(tmp_path, """
        import torch.multiprocessing as mp

        def child(i):
            from torch.nn import NoSuchLayer  # noqa: F401

        if __name__ == "__main__":
            mp.spawn(child, nprocs=1)
    """)
    assert out.returncode == 1
    assert "ProcessRaisedException" in out.stderr and "gap in TensorBrain" in out.stderr


def test_importing_a_submodule_a_function_shadows_keeps_the_function(tmp_path):
    # torch.autograd.gradcheck and torch.nn.utils.weight_norm are functions named like their
    # modules; importing the module through the alias replaced the function for the whole run
    out = _run(tmp_path, """
        import types
        import torch
        from torch.autograd.gradcheck import GradcheckError, gradcheck
        import torch.nn.utils.weight_norm
        assert gradcheck is torch.autograd.gradcheck, torch.autograd.gradcheck
        assert isinstance(torch.nn.utils.weight_norm, types.FunctionType)
        assert issubclass(GradcheckError, RuntimeError)
        x = torch.randn(3, dtype=torch.float64, requires_grad=True)
        print(torch.autograd.gradcheck(lambda t: (t * t).sum(), (x,)))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_alias_table_resolves_prefixes_only():
    from tensorbrain import as_torch
    assert as_torch.resolve("torch") == "tensorbrain"
    assert as_torch.resolve("torch.utils.data") == "tensorbrain.utils.data"
    assert as_torch.resolve("torchvision") is None and as_torch.resolve("numpy") is None


def test_tbrun_as_torch_runs_workers_through_the_alias(capsys):
    import pytest

    from tensorbrain.distributed.run import UsageError, parse_args
    cfg = parse_args(["--as-torch", "--nproc_per_node", "2", "train.py", "--lr", "1"])
    assert cfg.cmd[-5:] == ["tensorbrain.as_torch", "--quiet", "train.py", "--lr", "1"]
    assert cfg.cmd[1:3] == ["-u", "-m"]
    assert "`import torch` runs TensorBrain" in capsys.readouterr().err
    cfg = parse_args(["--as-torch", "-m", "pkg.train"])
    assert cfg.cmd[-3:] == ["--quiet", "-m", "pkg.train"]
    with pytest.raises(UsageError, match="no_python"):
        parse_args(["--as-torch", "--no_python", "prog"])
