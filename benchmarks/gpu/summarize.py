"""Turn the JSON and logs that ``run_all.sh`` leaves in a folder into one Markdown summary.

    python benchmarks/gpu/summarize.py OUT_DIR > OUT_DIR/summary.md
"""
from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET


def _load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def _train_table(train, title=""):
    """The training-step table of one ``train_step.py --json`` file (nothing when absent)."""
    if not train:
        return
    print(title, end="")
    print("| workload | precision | tb ms/step | torch ms/step | tb/torch | throughput vs torch | tb peak MiB "
          "| torch peak MiB |\n|---|---|---:|---:|---:|---:|---:|---:|")
    for r in train["rows"]:
        if "error" in r:
            print(f"| {r['workload']} | {r.get('amp', 'fp32')} | error: {r['error'][:120]} "
                  "| | | | | |")
            continue
        mib = lambda k: None if r.get(k) is None else r[k] / 2**20  # noqa: E731
        print(f"| {r['workload']} | {r.get('amp', 'fp32')} | {_fmt(r.get('tb_ms'))} | {_fmt(r.get('torch_ms'))} | "
              f"{_fmt(r.get('ratio'))} | {_fmt(r.get('throughput_vs_torch'))} | "
              f"{_fmt(mib('tb_peak_bytes'), '.0f')} | {_fmt(mib('torch_peak_bytes'), '.0f')} |")
    print()


def main(folder: str) -> None:
    print("# GPU run summary\n")
    steps = sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".rc"))
    print("Steps: " + ", ".join(
        f"{s} exit {open(os.path.join(folder, s + '.rc')).read().strip()}" for s in steps) + "\n")
    xml = os.path.join(folder, "tests-gpu.xml")
    if os.path.exists(xml):
        suite = ET.parse(xml).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        a = suite.attrib
        print(f"gpu tests: {a.get('tests')} run, {a.get('failures')} failed, {a.get('errors')} "
              f"errors, {a.get('skipped')} skipped, {a.get('time')} s")
        for case in suite.iter("testcase"):
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            if bad is not None:
                print(f"- FAILED {case.get('classname')}::{case.get('name')}: "
                      f"{(bad.get('message') or '')[:300]}")
        print()
    _train_table(_load(folder, "train-step.json"))
    _train_table(_load(folder, "conv-train.json"), "With TB_CUDA_CONV=1 (the CuPy conv kernels):\n\n")
    nccl = _load(folder, "nccl-overhead.json")
    if nccl:
        print(f"NCCL all_reduce at world size 1 on {nccl.get('device')} (us per call)\n")
        print("| bytes | tb | bare binding | cupyx | torch | #wrong |\n|---:|---:|---:|---:|---:|---:|")
        for r in nccl["rows"]:
            print(f"| {r['bytes']} | {_fmt(r.get('tb_us'))} | {_fmt(r.get('bare_us'))} | "
                  f"{_fmt(r.get('cupyx_us'))} | {_fmt(r.get('torch_us'))} | {r['wrong']} |")
        print()
    copy = _load(folder, "copy-bandwidth.json")
    if copy:
        print("| bytes | H2D tb | H2D cupy | H2D pinned | H2D tb pinned | D2H tb | D2H cupy "
              "| D2H pinned | (GB/s)\n|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in copy["rows"]:
            print(f"| {r['bytes']} | " + " | ".join(_fmt(r.get(k)) for k in (
                "h2d_tb", "h2d_cupy", "h2d_pinned", "h2d_tb_pinned", "d2h_tb", "d2h_cupy",
                "d2h_pinned")) + " | |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
