"""``tb.utils.collect_env`` (``torch.utils.collect_env``): a description of the environment
for bug reports: TensorBrain, Python, NumPy, CuPy and the GPUs, the native module, the OS.
``python -m tensorbrain.utils.collect_env`` prints it."""
from __future__ import annotations

import platform
import sys


def get_pretty_env_info() -> str:
    """The environment, one ``name: value`` per line.

    Returns:
        str: the text.
    """
    import numpy as np

    import tensorbrain as tb
    from .. import _native, _xp
    lines = [f"TensorBrain version: {tb.__version__}",
             f"Native module (tensorbrain._C): "
             f"{'available' if _native.is_available() else _native.why_unavailable()}",
             f"Python version: {sys.version.split()[0]} ({platform.python_implementation()})",
             f"Python platform: {platform.platform()}",
             f"NumPy version: {np.__version__}",
             f"CUDA available: {_xp.cuda_available()}"]
    if _xp._cupy is not None:
        lines.append(f"CuPy version: {_xp._cupy.__version__}")
    if _xp.cuda_available():
        lines += [f"GPU {i}: {tb.cuda.get_device_name(i)}" for i in range(tb.cuda.device_count())]
    else:
        lines.append(f"Why not: {_xp._CUPY_ERROR}")
    return "\n".join(lines)


def run(command):
    """Run ``command`` (a string through the shell, or an argument list) and return
    ``(returncode, stdout, stderr)``, the outputs stripped, as torch's helper.

    Args:
        command: the command.
    """
    import locale
    import subprocess
    try:
        p = subprocess.run(command, capture_output=True, shell=isinstance(command, str))
    except OSError as e:   # the program does not exist (argument-list form)
        return 127, "", str(e)
    enc = locale.getpreferredencoding()
    return p.returncode, p.stdout.decode(enc).strip(), p.stderr.decode(enc).strip()


def run_and_parse_first_match(run_lambda, command, regex):
    """The first group of ``regex`` in the output of ``run_lambda(command)``; None when the
    command fails or nothing matches."""
    import re
    rc, out, _ = run_lambda(command)
    if rc != 0:
        return None
    match = re.search(regex, out)
    return None if match is None else match.group(1)


def get_nvidia_driver_version(run_lambda=run):
    """The NVIDIA driver version ``nvidia-smi`` reports, or None without one.

    Args:
        run_lambda: the command runner (:func:`run`).
    """
    return run_and_parse_first_match(run_lambda, "nvidia-smi", r"Driver Version: (.*?) ")


def get_env_info() -> str:
    """The same text (torch returns a named tuple; programs print it)."""
    return get_pretty_env_info()


def main() -> None:
    """Print the environment."""
    print("Collecting environment information...")
    print(get_pretty_env_info())


if __name__ == "__main__":
    main()
