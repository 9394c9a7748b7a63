#!/usr/bin/env bash
# Everything the GPU issue needs from a lent GPU machine, in ONE command that fits a 7-minute call.
#
#   bash benchmarks/gpu/run_all.sh [--quick]     # on the device machine, from the repo root
#
# 1. facts: nvidia-smi, Python, CuPy, torch, the NCCL wheel -> $OUT/env.txt
# 2. install TensorBrain against the image's own packages (no package index there):
#    pip install --no-deps --no-build-isolation --no-index -e . with TB_NATIVE=require and
#    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc), so the native module and its NCCL binding are built
#    against this machine on all its cores; then NCCL is loaded and its version shown
# 3. every `gpu`-marked test (pytest -m gpu, 60 s per test), JUnit XML and log under $OUT
# 4. the GPU benchmarks in short rounds (train step vs torch in fp32 and bf16 autocast, NCCL
#    per-call overhead vs cupyx and torch, copy bandwidth, the nccl-tests-style all_reduce table),
#    JSON under $OUT
# 5. benchmarks/gpu/summarize.py writes $OUT/summary.md and prints it last
#
# --quick: steps 1-3 and one benchmark (the MLP train step, fp32 and bf16): the first call of a
# session whose fix is not yet known.
#
# Time: the whole command stays within TB_GPU_BUDGET seconds (default 390: a 7-minute call with
# room to copy results back). Each step gets min(its own limit, what is left of the budget less a
# 15 s reserve); a step that would get under 20 s is skipped and says so. Resumable: a step that
# finished leaves a marker in $TB_GPU_STATE (default /tmp/tb-gpu-state) and its files there, so a
# second call on the same (still warm) machine skips it and only copies its results to $OUT again.
# TB_GPU_FORCE=1 reruns everything; TB_GPU_ONLY="tests train" runs only the named steps;
# TB_GPU_PACK=1 leaves only summary.md and gpu-results.tgz (all the rest) in $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
QUICK=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "run_all.sh: unknown argument '$a' (only --quick)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$PWD/gpu-results}
STATE=${TB_GPU_STATE:-/tmp/tb-gpu-state}
PY=${PYTHON:-python3}
BUDGET=${TB_GPU_BUDGET:-390}
mkdir -p "$OUT" "$STATE"
[ "${TB_GPU_FORCE:-0}" = 1 ] && rm -f "$STATE"/*.done
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
t0=$(date +%s)
say() { echo "[run_all +$(( $(date +%s) - t0 ))s] $*"; }

# step NAME LIMIT_S CMD...: run once (marker), log to $STATE/NAME.log, copy its files to $OUT
step() {
  local name=$1 limit=$2; shift 2
  if [ -n "${TB_GPU_ONLY:-}" ] && [[ " $TB_GPU_ONLY " != *" $name "* ]]; then
    return 0
  fi
  local left=$(( BUDGET - ($(date +%s) - t0) - 15 ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ -f "$STATE/$name.done" ]; then
    say "$name: done in an earlier call, skipped"
  elif [ "$limit" -lt 20 ]; then
    say "$name: SKIPPED, only ${left}s of the ${BUDGET}s budget left"
    echo "skipped: budget" >"$STATE/$name.rc"
  else
    say "$name: start (limit ${limit}s)"
    # through bash -c: timeout(1) runs programs, not this script's functions (exported below)
    timeout -k 5 "$limit" bash -c '"$@"' "$name" "$@" >"$STATE/$name.log" 2>&1
    local rc=$?
    echo "$rc" >"$STATE/$name.rc"
    say "$name: exit $rc$([ "$rc" -eq 124 ] && echo ' (hit its time limit)')"
    [ "$rc" -eq 0 ] && touch "$STATE/$name.done"
    tail -n 5 "$STATE/$name.log"
  fi
  cp -f "$STATE/$name".* "$OUT"/ 2>/dev/null
  for f in "$STATE"/"$name"-*.json "$STATE"/"$name"-*.xml; do [ -e "$f" ] && cp -f "$f" "$OUT"/; done
  return 0
}

env_facts() {
  nvidia-smi || true
  "$PY" - <<'PY'
import importlib, platform, sys
print("python", sys.version.split()[0], platform.machine())
for name in ("numpy", "cupy", "ml_dtypes", "torch", "mpi4py", "safetensors", "scikit_build_core",
             "pybind11"):
    try:
        m = importlib.import_module(name)
        print(name, getattr(m, "__version__", "?"))
    except Exception as exc:
        print(name, "missing:", exc)
try:
    import cupy
    print("cuda runtime", cupy.cuda.runtime.runtimeGetVersion(), "devices", cupy.cuda.runtime.getDeviceCount())
    print("device 0:", cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
    import ml_dtypes
    a = cupy.arange(4, dtype=ml_dtypes.bfloat16)
    print("cupy bfloat16: add", (a + a).get(), "matmul", (a[:, None] @ a[None, :]).sum().get())
except Exception as exc:
    print("cupy/cuda/bfloat16:", type(exc).__name__, exc)
PY
  "$PY" -m pip list 2>/dev/null | grep -iE "nccl|cupy|torch|ml.dtypes" || true
}

install() {
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) TB_NATIVE=require \
    "$PY" -m pip install --no-deps --no-build-isolation --no-index -e . &&
  "$PY" - <<'PY'
import tensorbrain as tb, tensorbrain._native as n
from tensorbrain.distributed import _nccl_lib
assert n.is_available(), n.why_unavailable()
print("native module:", n.module().__file__)
print("NCCL:", _nccl_lib.load(), _nccl_lib.version())
print("cuda available:", tb.cuda.is_available(), tb.cuda.why_unavailable())
PY
}

export PY
export -f env_facts install
step env 60 env_facts
step install 180 install
# pytest-xdist (in the GPU image) spreads the tests over 8 workers: one GPU holds their 8 contexts
XDIST=$("$PY" -c 'import xdist' 2>/dev/null && echo "-n 8")
step tests 240 "$PY" -m pytest -m gpu -q -rs -p no:cacheprovider --timeout 60 $XDIST \
  --junitxml="$STATE/tests-gpu.xml" tests
if [ "$QUICK" = 1 ]; then
  step train 90 "$PY" benchmarks/gpu/train_step.py --workloads mlp --amp fp32,bf16 --rounds 3 \
    --steps 10 --json "$STATE/train-step.json"
else
  step train 150 "$PY" benchmarks/gpu/train_step.py --amp fp32,bf16 --rounds 3 --steps 10 \
    --json "$STATE/train-step.json"
  # the CuPy conv kernels (TB_CUDA_CONV, off by default until a GPU run shows them right)
  step conv 60 env TB_CUDA_CONV=1 "$PY" benchmarks/gpu/train_step.py --workloads resnet18 \
    --amp fp32 --rounds 3 --steps 10 --json "$STATE/conv-train.json"
  step nccl 60 "$PY" benchmarks/gpu/nccl_overhead.py -n 30 -r 3 --json "$STATE/nccl-overhead.json"
  step copy 40 "$PY" benchmarks/gpu/copy_bandwidth.py --rounds 5 --json "$STATE/copy-bandwidth.json"
  step allreduce 40 "$PY" benchmarks/nccl_allreduce.py -b 8 -e 256M -f 8 -n 10 -r 2
fi
"$PY" benchmarks/gpu/summarize.py "$OUT" >"$OUT/summary.md" 2>&1
cat "$OUT/summary.md"
# TB_GPU_PACK=1: the device tool brings back at most 8 files, so everything but summary.md goes
# into one gpu-results.tgz
if [ "${TB_GPU_PACK:-0}" = 1 ]; then
  tar -czf "$STATE/gpu-results.tgz" -C "$OUT" . &&
    find "$OUT" -mindepth 1 ! -name summary.md -delete && mv "$STATE/gpu-results.tgz" "$OUT"/
fi
say "all steps: $(cd "$STATE" && for f in *.rc; do printf '%s=%s ' "${f%.rc}" "$(head -c 40 "$f")"; done)"
