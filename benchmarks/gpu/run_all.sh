#!/usr/bin/env bash
# Everything the GPU issue needs from a lent GPU machine, in ONE command that fits a 10-minute run.
#
#   bash benchmarks/gpu/run_all.sh            # on the device machine, from the repo root
#
# 1. facts: nvidia-smi, Python, CuPy, torch, the NCCL wheel -> $OUT/env.txt
# 2. install TensorBrain against the image's own packages (no package index there):
#    pip install --no-deps --no-build-isolation -e . with TB_NATIVE=require, so the native module
#    and its NCCL binding are built against this machine; then NCCL is loaded and its version shown
# 3. every `gpu`-marked test (pytest -m gpu), JUnit XML and log under $OUT
# 4. the GPU benchmarks (train step vs torch, NCCL per-call overhead vs cupyx and torch, copy
#    bandwidth, the nccl-tests-style all_reduce table), JSON under $OUT
# 5. benchmarks/gpu/summarize.py writes $OUT/summary.md and prints it last
#
# Resumable: a step that finished leaves a marker in $TB_GPU_STATE (default /tmp/tb-gpu-state) and
# its files there, so a second call on the same (still warm) machine skips it and only copies its
# results to $OUT again. TB_GPU_FORCE=1 reruns everything. Each step has its own time limit, so one
# that hangs cannot eat the whole run.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-$PWD/gpu-results}
STATE=${TB_GPU_STATE:-/tmp/tb-gpu-state}
PY=${PYTHON:-python3}
mkdir -p "$OUT" "$STATE"
[ "${TB_GPU_FORCE:-0}" = 1 ] && rm -f "$STATE"/*.done
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
t0=$(date +%s)
say() { echo "[run_all +$(( $(date +%s) - t0 ))s] $*"; }

# step NAME LIMIT_S CMD...: run once (marker), log to $STATE/NAME.log, copy its files to $OUT
step() {
  local name=$1 limit=$2; shift 2
  if [ -f "$STATE/$name.done" ]; then
    say "$name: done in an earlier call, skipped"
  else
    say "$name: start (limit ${limit}s)"
    timeout -k 10 "$limit" "$@" >"$STATE/$name.log" 2>&1
    local rc=$?
    echo "$rc" >"$STATE/$name.rc"
    say "$name: exit $rc"
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
for name in ("numpy", "cupy", "torch", "mpi4py", "safetensors", "scikit_build_core", "pybind11"):
    try:
        m = importlib.import_module(name)
        print(name, getattr(m, "__version__", "?"))
    except Exception as exc:
        print(name, "missing:", exc)
try:
    import cupy
    print("cuda runtime", cupy.cuda.runtime.runtimeGetVersion(), "devices", cupy.cuda.runtime.getDeviceCount())
    print("device 0:", cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
except Exception as exc:
    print("cupy/cuda:", exc)
PY
  "$PY" -m pip list 2>/dev/null | grep -iE "nccl|cupy|torch" || true
}

install() {
  TB_NATIVE=require "$PY" -m pip install --no-deps --no-build-isolation --no-index -e . &&
  "$PY" - <<'PY'
import tensorbrain as tb, tensorbrain._native as n
from tensorbrain.distributed import _nccl_lib
assert n.is_available(), n.why_unavailable()
print("native module:", n.module().__file__)
print("NCCL:", _nccl_lib.load(), _nccl_lib.version())
print("cuda available:", tb.cuda.is_available(), tb.cuda.why_unavailable())
PY
}

step env 60 env_facts
step install 300 install
step tests 360 "$PY" -m pytest -m gpu -q -rs -p no:cacheprovider --timeout 120 \
  --junitxml="$STATE/tests-gpu.xml" tests
step train 240 "$PY" benchmarks/gpu/train_step.py --json "$STATE/train-step.json"
step nccl 180 "$PY" benchmarks/gpu/nccl_overhead.py --json "$STATE/nccl-overhead.json"
step copy 90 "$PY" benchmarks/gpu/copy_bandwidth.py --json "$STATE/copy-bandwidth.json"
step allreduce 120 "$PY" benchmarks/nccl_allreduce.py -b 8 -e 256M -f 4 -r 3
"$PY" benchmarks/gpu/summarize.py "$OUT" >"$OUT/summary.md" 2>&1
cat "$OUT/summary.md"
say "all steps: $(cd "$STATE" && for f in *.rc; do printf '%s=%s ' "${f%.rc}" "$(cat "$f")"; done)"
