"""The Python examples in docs/*.md and README.md run.

Each fenced block marked ``python`` runs in its own fresh interpreter (temporary working
directory, repo root on PYTHONPATH, 60 s limit) and must exit 0. A block that cannot run on a
CPU-only machine has ``<!-- skip-test: reason -->`` on the line before its fence (see
docs/index.md). New pages are picked up automatically.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
SKIP = "<!-- skip-test"


def extract_blocks(text: str):
    """(line number, info word, code, skip reason or None) for each top-level fenced block.

    A fence closes only with the same character, at least as long (CommonMark), so a ```python
    shown inside a ````markdown example is not run.
    """
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).lower()
        prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        skip = None
        if prev.startswith(SKIP):
            skip = prev[len(SKIP):].removesuffix("-->").strip(" :-") or "marked skip-test"
        body, j = [], i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence[0] * len(fence))
                                      and set(lines[j].strip()) == {fence[0]}):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        blocks.append((i + 1, info, "\n".join(body) + "\n", skip))
        i = j + 1
    return blocks


def _cases():
    pages = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    for page in pages:
        if not page.exists():
            continue
        for line, info, code, skip in extract_blocks(page.read_text()):
            if info != "python":
                continue
            marks = [pytest.mark.skip(reason=skip)] if skip else []
            yield pytest.param(page, line, code, id=f"{page.relative_to(ROOT)}:{line}", marks=marks)


@pytest.mark.parametrize("page, line, code", list(_cases()))
def test_doc_block_runs(page, line, code, tmp_path):
    script = tmp_path / f"{page.stem}_line{line}.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    env.pop("TB_NATIVE", None)  # examples describe the default behaviour
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, (f"{page.relative_to(ROOT)} block at line {line} failed:\n"
                                  f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")


def test_extract_blocks_handles_nesting_skip_markers_and_languages():
    text = "\n".join([
        "intro", "```python", "a = 1", "```",
        "<!-- skip-test: needs a GPU -->", "", "```python", "gpu()", "```",
        "````markdown", "```python", "not_a_block()", "```", "````",
        "```bash", "echo hi", "```",
        "  ```python", "  indented = 2", "  ```",
    ])
    blocks = extract_blocks(text)
    assert [(b[1], b[2], b[3]) for b in blocks] == [
        ("python", "a = 1\n", None),
        ("python", "gpu()\n", "needs a GPU"),
        ("markdown", "```python\nnot_a_block()\n```\n", None),
        ("bash", "echo hi\n", None),
        ("python", "indented = 2\n", None),
    ]
    assert [b[0] for b in blocks] == [2, 7, 10, 15, 18]
