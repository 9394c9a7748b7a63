"""Every ``>>>`` example in tensorbrain's docstrings runs and prints what it shows.

The docstrings' ``Example:`` sections are the API reference's examples (docs/api/, rendered by
mkdocstrings), so they are held to the same rule as the docs pages' blocks (tests/test_docs.py):
they run. Every module under tensorbrain/ whose source holds ``>>>`` is found, imported and run
with ``doctest.testmod``, in one fresh interpreter (examples may set the default dtype, seed the
generator or configure logging; none of that leaks into this process). The Tensor class's
methods, defined in two modules, are run on the class itself by
tests/test_tensor.py::test_tensor_method_docstring_examples_run.
"""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

_RUNNER = r"""
import doctest, importlib, json, sys
results = {}
for name in sys.argv[1:]:
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # an import error is a failure of this module's examples
        results[name] = [None, f"import failed: {type(exc).__name__}: {exc}"]
        continue
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner()
    out = []
    for test in finder.find(module, name):
        runner.run(test, out=out.append)
    summary = runner.summarize(verbose=False)
    results[name] = [summary.attempted, "".join(out) if summary.failed else ""]
print(json.dumps(results))
"""


def modules_with_examples(root=ROOT / "tensorbrain"):
    """The dotted names of tensorbrain's modules whose source holds a ``>>>`` example."""
    names = []
    for path in sorted(root.rglob("*.py")):
        if ">>>" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(root.parent).with_suffix("").parts
            names.append(".".join(parts).removesuffix(".__init__"))
    return names


def test_every_docstring_example_runs():
    names = modules_with_examples()
    assert len(names) > 50 and "tensorbrain.nn.modules.linear" in names
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("TB_LOG_LEVEL", None)
    proc = subprocess.run([sys.executable, "-c", _RUNNER, *names], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    import json
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    failed = {name: report for name, (_, report) in results.items() if report}
    assert not failed, "\n".join(f"--- {n}\n{r[:3000]}" for n, r in failed.items())
    # the examples are found (a finder that saw nothing would pass the line above)
    assert sum(attempted or 0 for attempted, _ in results.values()) >= 400
