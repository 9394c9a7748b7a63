"""``python -m tensorbrain.as_torch [--quiet] (script.py | -m module) [args...]``."""
from __future__ import annotations

import os
import runpy
import sys

from . import child_environment, install, notice


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    quiet = False
    while argv and argv[0] == "--quiet":
        quiet = True
        argv.pop(0)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip() if __doc__ else "", file=sys.stderr)
        print("Runs a PyTorch script with `import torch` resolving to TensorBrain.", file=sys.stderr)
        sys.exit(0 if argv else 2)
    os.environ.update(child_environment())
    install()
    if not quiet:
        print(notice(), file=sys.stderr, flush=True)
    if argv[0] == "-m":
        if len(argv) < 2:
            sys.exit("python -m tensorbrain.as_torch -m: a module name is needed")
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    script = argv[0]
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
