"""tensorbrain._config and docs/environment.md list the same variables.

Every variable declared with ``_config.declare`` needs a row in the table of
docs/environment.md, and every ``TB_*`` row there must be declared (a row for a variable nobody
reads misleads users). Rows for variables TensorBrain does not own (``RANK``, ``MASTER_ADDR``,
... set by launchers) are allowed without a declaration.
"""
import re
from pathlib import Path

import pytest

from tensorbrain import _config

DOC = Path(__file__).resolve().parents[1] / "docs" / "environment.md"
ROW = re.compile(r"^\|\s*`?([A-Z][A-Z0-9_]*)`?\s*\|")


def _documented() -> dict[str, str]:
    rows = {}
    for line in DOC.read_text().splitlines():
        m = ROW.match(line)
        if m and m.group(1) != "variable":
            assert m.group(1) not in rows, f"docs/environment.md lists {m.group(1)} twice"
            rows[m.group(1)] = line
    return rows


def test_table_has_the_agreed_header():
    assert "| variable | default | meaning |" in DOC.read_text()


def test_every_declared_variable_has_a_row():
    missing = sorted(set(_config.VARS) - set(_documented()))
    assert not missing, (f"declared in tensorbrain/_config.py but missing from docs/environment.md: "
                         f"{missing}; add a row '| `NAME` | default | meaning |'")


def test_every_tb_row_is_declared():
    extra = sorted(n for n in _documented() if n.startswith("TB_") and n not in _config.VARS)
    assert not extra, (f"docs/environment.md documents {extra}, which tensorbrain/_config.py does "
                       "not declare: declare them there or remove the rows")


def test_get_parses_defaults_and_rejects_bad_values():
    assert _config.get("TB_NATIVE", env={}) == "auto"
    assert _config.get("TB_SHM", env={"TB_SHM": "off"}) is False
    with pytest.raises(ValueError, match="TB_SHM='maybe' is invalid"):
        _config.get("TB_SHM", env={"TB_SHM": "maybe"})


def test_declaring_twice_is_an_error():
    with pytest.raises(RuntimeError, match="TB_NATIVE declared twice"):
        _config.declare("TB_NATIVE", str, "", "duplicate")
