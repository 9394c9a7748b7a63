"""The one place TensorBrain reads environment variables.

Every variable the package reads is declared here with its type, default and a one-line
description; ``docs/environment.md`` is the user-facing table of the same variables (a test keeps
the two in step). Read a variable with :func:`get`, never with ``os.environ`` directly, so that a
user can find every knob in one place.

>>> from tensorbrain import _config
>>> _config.get("TB_SHM", env={"TB_SHM": "0"})
False
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Var:
    name: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    torch_name: str = ""  # torch's variable for the same thing, read when ours is unset


class ConfigError(ValueError):
    """A TensorBrain environment variable has a value that does not parse (one line per
    variable, each naming it, its value and what it accepts)."""


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected a boolean (1/0, true/false, yes/no, on/off), got {text!r}")


def _str(text: str) -> str:
    return text


def choice(*allowed: str) -> Callable[[str], str]:
    """A parser for one of ``allowed`` (case-insensitive), returned upper-cased."""
    def parse(text: str) -> str:
        value = text.strip().upper()
        if value not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {text!r}")
        return value
    return parse


VARS: dict[str, Var] = {}


def declare(name: str, parse: Callable[[str], Any], default: Any, help: str,
            torch_name: str = "") -> Var:
    """Declare a variable (module import time). Declaring the same name twice is an error.
    ``torch_name``: torch's variable for the same setting, honoured when ``name`` is unset."""
    if name in VARS:
        raise RuntimeError(f"environment variable {name} declared twice")
    var = VARS[name] = Var(name, parse, default, help, torch_name)
    return var


def get(name: str, env: Mapping[str, str] | None = None) -> Any:
    """The parsed value of a declared variable, or its default when unset.

    A value that does not parse raises ValueError naming the variable, so a typo in a launch
    script is reported instead of silently ignored.
    """
    var = VARS[name]
    env = os.environ if env is None else env
    raw, used = env.get(name), name
    if raw is None and var.torch_name:
        raw, used = env.get(var.torch_name), var.torch_name
    if raw is None:
        return var.default
    try:
        return var.parse(raw)
    except ValueError as exc:
        raise ConfigError(f"environment variable {used}={raw!r} is invalid: {exc}") from None


# ***** checking the whole environment (import time, and tbrun before it starts workers) *****
def problems(env: Mapping[str, str] | None = None) -> list[str]:
    """One line for each declared variable set to a value that does not parse.

    >>> problems({"TB_SHM": "maybe", "TB_LOG_LEVEL": "info"})
    ["environment variable TB_SHM='maybe' is invalid: expected a boolean (1/0, true/false, yes/no, on/off), got 'maybe'"]
    """
    out = []
    for name in VARS:
        try:
            get(name, env)
        except ConfigError as exc:
            out.append(str(exc))
    return out


def misspelt(env: Mapping[str, str] | None = None) -> list[str]:
    """One line for each ``TB_*`` name that is not declared but is close to one that is (a
    likely typo: ``TB_NATVE``), naming the nearest. Other unknown ``TB_*`` names (TensorBoard's
    ``TB_LOG_DIR``, a project's own) are not TensorBrain's business and are left alone.

    >>> misspelt({"TB_TIMLINE": "t.json", "TB_LOG_DIR": "runs"})
    ['TB_TIMLINE is not a TensorBrain environment variable and is ignored: did you mean TB_TIMELINE?']
    """
    env = os.environ if env is None else env
    out = []
    for name in sorted(k for k in env if k.startswith("TB_") and k not in VARS):
        near = did_you_mean(name, VARS, cutoff=0.8)
        if near:
            out.append(f"{name} is not a TensorBrain environment variable and is ignored:{near}")
    return out


def did_you_mean(word: str, known, cutoff: float = 0.6) -> str:
    """`` did you mean X?`` for the known name nearest to ``word`` (difflib), or ''.

    The one wording of "did you mean" for backends, dtypes, devices and variables.

    >>> did_you_mean("glo", ["gloo", "mpi", "nccl"])
    ' did you mean gloo?'
    """
    import difflib
    word, names = str(word), [str(k) for k in known]
    # a cut-short name ('bfloat', 'glo') means the known name it starts, not the nearest by edits
    near = sorted((n for n in names if word and n.lower().startswith(word.lower())), key=len) \
        or difflib.get_close_matches(word, names, n=1, cutoff=cutoff)
    return f" did you mean {near[0]}?" if near else ""


def check_at_import() -> None:
    """``import tensorbrain``'s check: every bad value at once, as one line each, and a warning
    for each misspelt ``TB_*`` name (once per job: not in tbrun's workers, whose launcher
    checked already, and only on rank 0 under other launchers)."""
    bad = problems()
    if bad:
        _print_config_errors_as_one_line()
        raise ConfigError("\n".join(bad))
    for line in misspelt() if says_for_the_job() else []:
        import warnings
        warnings.warn(line, ConfigWarning, stacklevel=3)


def says_for_the_job() -> bool:
    """Whether this process says import-time notices for its job: not tbrun's workers (tbrun
    itself imports TensorBrain and said them once), and under other launchers rank 0 only."""
    return not os.environ.get("TB_RUN_ID") and os.environ.get("RANK", "0") == "0"


class ConfigWarning(UserWarning):
    """A ``TB_*`` environment variable that TensorBrain does not know but looks like one."""


def _print_config_errors_as_one_line() -> None:
    # A bad value would otherwise end a traceback through the import machinery; the process
    # is about to stop on it, so print just the error, as a command-line tool does. Only
    # ConfigError is printed this way; every other exception keeps the hook it had.
    import sys
    previous = sys.excepthook

    def hook(kind, exc, tb):
        if issubclass(kind, ConfigError):
            for line in str(exc).splitlines():
                print(f"tensorbrain: error: {line}", file=sys.stderr)
        else:
            previous(kind, exc, tb)
    sys.excepthook = hook


# ***** the variables *****
# Core
def _native(text: str) -> str:
    value = text.strip().lower()
    if value not in ("", "auto", "require", "skip", "0", "1", "on", "off", "true", "false",
                     "yes", "no"):
        raise ValueError("expected auto, require or skip (build time), or 0/1 (run time)")
    return value or "auto"


declare("TB_HUB_GITHUB", _str, "https://github.com",
        "Base URL tb.hub.load/list/help download GitHub repositories from "
        "(<base>/<owner>/<name>/zipball/<ref>): a mirror, or file:// in tests")
declare("TB_NATIVE", _native, "auto",
        "Install time (pip install): 'auto' builds tensorbrain._C and falls back to pure Python if "
        "the build fails, 'require' fails the install instead, 'skip' never builds it. Run time: "
        "0/off/skip ignore an installed tensorbrain._C (tensorbrain/_native.py); other values error.")
declare("TB_MALLOC_TUNING", _bool, True,
        "On glibc, keep freed blocks up to 32 MiB in the process heap (mallopt, set once at import) "
        "so training steps stop faulting in fresh pages (MLP B=512: 20.4 -> 16.1 ms/step). 0 "
        "leaves glibc's defaults alone.")
declare("TB_SHM", _bool, True,
        "Use the shared-memory transport for ranks on the same host (tcp backend). 0 turns it off.")
declare("TB_FASTPATH", _bool, True,
        "all_reduce of one contiguous tensor (SUM/AVG, default group, synchronous, every rank on "
        "this host) in one native call (the collective pipeline's first step, TCPBackend.fast_all_reduce). 0: the general path.")
declare("TB_BLAS_POOL", _bool, True,
        "With tb.set_num_threads(n > 1): run NumPy's OpenBLAS (scipy-openblas 0.3.31+, pthreads) "
        "on the native kernels' thread pool through OpenBLAS's threads callback, so the two do not "
        "fight for the cores (csrc/kernels/parallel.cpp), and without MKL run a batch of products "
        "(a convolution's per-image GEMMs, batched matmul) one item per pool thread, each a "
        "one-thread OpenBLAS GEMM (csrc/kernels/blas.cpp). 0: OpenBLAS keeps its own threads and "
        "NumPy's matmul runs the batches.")
declare("TB_GEMM", choice("AUTO", "MKL", "NUMPY"), "AUTO",
        "CPU float32/float64 matrix products of linear layers, convolutions and matmul: MKL (the "
        "`mkl` wheel's libmkl_rt, sequential, split across tb.set_num_threads threads; "
        "tensorbrain/_gemm.py) or NUMPY (its OpenBLAS). AUTO: MKL when it is installed and the CPU "
        "is an Intel one (on an AMD EPYC it was slower than OpenBLAS at some shapes).")
declare("TB_WINOGRAD", _bool, True,
        "Stride-1 3x3 convolutions (groups 1, float32/float64 NumPy arrays, enough channels and "
        "tiles) by Winograd's F(2x2, 3x3): 2.25x fewer multiplications than im2col + GEMM, the "
        "same result up to rounding (tensorbrain/_ops/winograd.py). 0: im2col + GEMM.")
declare("TB_CUDA_CONV", _bool, False,
        "GPU: float32 2-D convolutions on TensorBrain's CuPy im2col/col2im kernels (one GEMM per "
        "convolution; about 280 fewer launches per ResNet-18 step). Off until they have run on a "
        "GPU: their index arithmetic is checked on the CPU only (issue 34).")
declare("TB_FSDP_PAGE_CACHE", int, 2,
        "FSDP on the CPU: how many released units' pages to keep and move (mremap) into the next "
        "unit of the same size that all-gathers, instead of returning them to the OS and faulting "
        "fresh zeroed pages in (tensorbrain/distributed/fsdp/_pages.py). 0: always return them.")
# NCCL backend (tensorbrain/distributed/_nccl_lib.py)
declare("TB_NCCL_LIBRARY", _str, "",
        "Path of the NCCL library (libnccl.so.2) the nccl backend opens; when set, only this file "
        "is tried. Unset: the nvidia-nccl-cu12/-cu13 wheel, then the system library path.")
# Stores and launcher (tensorbrain/distributed/_store/, rendezvous.py, run.py)
declare("TB_REFERENCE_PYTHON", _str, "",
        "Tests only: the Python interpreter that has the real PyTorch, DeepSpeed and Accelerate "
        "(the 'reference' extra; CI keeps one outside the clone) for tests/frontdoors/test_real_libraries.py. "
        "Empty: this interpreter, when it has them.")
declare("TB_SLURM_LAUNCHED", _bool, False,
        "Set to 1 by tensorbrain.distributed.slurm for the processes a launch command starts in "
        "nntool's relaunch: a call of the slurm_fn function then runs it instead of submitting.")
declare("TB_STORE_SECRET", _str, "",
        "Shared secret for TCPStore connections: when set (same value on every node), client and "
        "server prove they know it with an HMAC-SHA256 challenge-response at connect. Empty: off.")
declare("TB_RESTART_COUNT", int, 0,
        "Set by tbrun for workers: how many times the node group has been restarted. Rendezvous "
        "keys are scoped by it so a restarted group never meets the previous attempt's keys.")
# MPI backend (tensorbrain/distributed/backends/mpi.py)
declare("TB_MPI_ABORT_ON_ERROR", _bool, True,
        "Under mpiexec, an uncaught exception on one rank calls MPI_Abort so every rank ends "
        "instead of waiting forever in a collective. 0 turns the hook off.")
declare("TB_MPI_INLINE_CHECK", _bool, True,
        "mpi backend: exchange each collective's fingerprint as one MPI reduction that also "
        "carries all_reduces of up to 256 bytes (one MPI call per small all_reduce, check "
        "included). 0 uses an all-gather beside each collective instead. Agreed when a group "
        "is made: one rank with 0 (or without tensorbrain._C) makes the group use the all-gather.")
# tcp backend (tensorbrain/distributed/backends/tcp/)
declare("TB_IFNAME", _str, "",
        "Network interface whose IPv4 address the tcp backend listens on and advertises to "
        "peers (e.g. eth0). Empty: the address that routes to the store's host (MASTER_ADDR).")
declare("TB_DISTRIBUTED_DEBUG", choice("OFF", "INFO", "DETAIL"), "OFF",
        "OFF, INFO or DETAIL (any other value is an error), the same on every backend. "
        "Mismatched collectives (op, dtype, count, root) are detected at every level. INFO: "
        "the tensorbrain.distributed logger also logs each collective's summary (op, group, "
        "seq, dtype, bytes, time) at INFO. DETAIL: INFO, and ranks also compare shapes and "
        "report each rank's call site when they differ (as TORCH_DISTRIBUTED_DEBUG=DETAIL). "
        "Unset: TORCH_DISTRIBUTED_DEBUG's value, with the same meaning.",
        torch_name="TORCH_DISTRIBUTED_DEBUG")
declare("TB_TCP_UNIX", _bool, True,
        "tcp backend: connect ranks on the same host through Unix stream sockets (2-3x the "
        "throughput of TCP loopback here). 0 uses TCP for every peer.")
declare("TB_TCP_SPLICE", _bool, True,
        "tcp backend: the ring's large frames to a same-host peer (Unix sockets) lend their pages "
        "to the kernel (vmsplice + splice) instead of being copied into it; the op waits for the "
        "peer to read them before it returns (tcp/lend.py). 0 copies every frame.")
declare("TB_ROUND", int, 0,
        "Set by tbrun for workers: its rendezvous round (+1 on every restart and every node "
        "joining late); rendezvous keys are scoped by it.")
declare("TB_MAX_RESTARTS", int, 0,
        "Set by tbrun for workers: the --max_restarts it was given (so a script can tell whether "
        "this is its last attempt).")
declare("TB_RUN_ID", _str, "",
        "Set by tbrun for workers: this job's run id (--rdzv_id, or random with --standalone). "
        "Shared-memory segments are named /dev/shm/tb_<run_id>_* so tbrun can remove leftovers.")
declare("TB_FAULT_TOLERANT", _bool, False,
        "Set to 1 by tbrun --fault_tolerant for its workers: hvd.init() and "
        "tb.distributed.elastic join the running group through the quorum (live recovery) "
        "instead of a fixed RANK/WORLD_SIZE rendezvous.")
declare("TB_FT_MIN_REPLICAS", int, 1,
        "Live recovery (tb.distributed.ft, elastic): the fewest replicas the group may shrink "
        "to; a quorum that cannot reach it raises, naming the missing replicas.")
declare("TB_FT_TIMEOUT", float, 60.0,
        "Live recovery: seconds for collectives and for a quorum round to wait for a missing "
        "replica (a frozen one is dropped after it).")
declare("TB_USE_AGENT_STORE", _bool, False,
        "Set by tbrun for workers: the launcher's agent on node 0 already serves the TCPStore at "
        "MASTER_ADDR:MASTER_PORT, so rank 0 connects to it instead of starting its own.")
declare("TB_DEFAULT_BACKEND", _str, "",
        "Backend that init_process_group(backend=None) uses for CPU tensors (e.g. mpi for jobs "
        "started with mpiexec). Empty: tcp.")
# Observability (tensorbrain/_logging.py, tensorbrain/distributed/_observe.py)
declare("TB_LOG_LEVEL", choice("DEBUG", "INFO", "WARNING", "ERROR"), "WARNING",
        "Level of the 'tensorbrain' logger and its children (tensorbrain.distributed, ...): "
        "DEBUG, INFO, WARNING or ERROR; records go to stderr, prefixed with the rank once a "
        "process group exists. tbrun's notices are WARNING records (ERROR hides them).")
declare("TB_TIMELINE", _str, "",
        "Path of a Chrome-trace/Perfetto JSON timeline of every collective (rank, op, bytes, "
        "start, end) and DDP bucket, written per rank at exit or destroy_process_group: '{rank}' "
        "in the path is replaced by the rank, else '.rank<N>' goes before the extension. Empty: "
        "off (no cost).")
declare("HOROVOD_TIMELINE", _str, "",
        "Horovod's name for the timeline: as TB_TIMELINE (which wins when both are set), except "
        "that rank 0 writes the path itself and the other ranks '.rank<N>' beside it.")
declare("TB_RAW_ESCAPE", _bool, False,
        "Set to 1 by tbrun for its workers: a line a worker prints starting with the byte 0x1e "
        "(ASCII record separator) is shown without tbrun's '[rank N] ' prefix (tb-collectives' "
        "table uses it).")
declare("TB_WAIT_REPORT_S", float, 30.0,
        "While init_process_group (rank 0) waits for ranks to join, it prints every this many "
        "seconds which ranks have joined and which are missing, and what to check. 0: never.")
