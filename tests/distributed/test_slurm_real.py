"""tensorbrain on a real (one-node) Slurm: srun without a launcher, sbatch + srun tbrun,
scancel, requeue and resume. Skipped where Slurm + munge are not installed (see _slurm.py)."""
import sys
import textwrap

from ._slurm import slurm  # noqa: F401  (fixture)


def test_srun_two_tasks_form_a_group_from_slurm_variables(slurm, tmp_path):  # noqa: F811
    w = tmp_path / "train.py"
    w.write_text(textwrap.dedent("""
        import tensorbrain as tb
        import tensorbrain.distributed as dist
        dist.init_process_group("tcp")
        x = tb.ones(2) * (dist.get_rank() + 1)
        dist.all_reduce(x)
        print("OK", dist.get_rank(), dist.get_world_size(), x.tolist(), flush=True)
        dist.destroy_process_group()
        """))
    r = slurm.run("srun", "-n", "2", "--kill-on-bad-exit=1", sys.executable, str(w), timeout=60)
    lines = sorted(x for x in r.stdout.splitlines() if x.startswith("OK"))
    assert lines == ["OK 0 2 [3.0, 3.0]", "OK 1 2 [3.0, 3.0]"], r.stderr
