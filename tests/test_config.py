"""tensorbrain._config and docs/environment.md list the same variables.

Every variable declared with ``_config.declare`` needs a row in the table of
docs/environment.md, and every ``TB_*`` row there must be declared (a row for a variable nobody
reads misleads users). Rows for variables TensorBrain does not own (``RANK``, ``MASTER_ADDR``,
... set by launchers) are allowed without a declaration.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tensorbrain as tb
from tensorbrain import _config
from tensorbrain.distributed import backends

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "environment.md"
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


def test_torch_distributed_debug_is_honoured_when_ours_is_unset():
    assert _config.get("TB_DISTRIBUTED_DEBUG", env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}) == "DETAIL"
    assert _config.get("TB_DISTRIBUTED_DEBUG", env={"TORCH_DISTRIBUTED_DEBUG": "detail",
                                                    "TB_DISTRIBUTED_DEBUG": "OFF"}) == "OFF"
    with pytest.raises(ValueError, match="TORCH_DISTRIBUTED_DEBUG='loud' is invalid"):
        _config.get("TB_DISTRIBUTED_DEBUG", env={"TORCH_DISTRIBUTED_DEBUG": "loud"})


def test_misspelt_names_name_the_nearest_known_one():
    env = {"TB_NATVE": "0", "TB_DISTRIBUTED_DEBG": "INFO", "TB_LOG_DIR": "runs", "TB_SHM": "0"}
    assert _config.misspelt(env) == [
        "TB_DISTRIBUTED_DEBG is not a TensorBrain environment variable and is ignored: did you "
        "mean TB_DISTRIBUTED_DEBUG?",
        "TB_NATVE is not a TensorBrain environment variable and is ignored: did you mean "
        "TB_NATIVE?"]


def _python(code, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("TB_") and k != "RANK"}
    full.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                          timeout=60, cwd="/")


def test_import_with_a_bad_value_is_one_line_per_variable():
    proc = _python("import tensorbrain", TB_SHM="maybe", TB_LOG_LEVEL="loud")
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [  # no traceback: one line for each bad variable
        "tensorbrain: error: environment variable TB_SHM='maybe' is invalid: expected a boolean "
        "(1/0, true/false, yes/no, on/off), got 'maybe'",
        "tensorbrain: error: environment variable TB_LOG_LEVEL='loud' is invalid: expected one "
        "of DEBUG, INFO, WARNING, ERROR, got 'loud'"]


def test_import_warns_once_for_a_misspelt_name_on_rank_0_only():
    proc = _python("import tensorbrain", TB_TIMLINE="t.json")
    assert proc.returncode == 0
    assert proc.stderr.count("did you mean TB_TIMELINE?") == 1
    assert "did you mean" not in _python("import tensorbrain", TB_TIMLINE="t", RANK="1").stderr
    assert "did you mean" not in _python("import tensorbrain", TB_TIMLINE="t", TB_RUN_ID="x").stderr


@pytest.mark.parametrize("call,message", [
    (lambda: tb.zeros(2, dtype="flaot32"), "'flaot32' is not a dtype TensorBrain understands: "
                                           "did you mean float32?"),
    (lambda: tb.zeros(2, dtype="bfloat"), "did you mean bfloat16?"),
    (lambda: tb.device("cdua:0"), "unknown device 'cdua:0': did you mean cuda?"),
    (lambda: tb.device("gpu"), "unknown device 'gpu': did you mean cuda?"),
    (lambda: tb.ones(2).to("gpu"), "'gpu' is not a dtype TensorBrain understands: did you mean "
                                   "the device 'cuda'"),
    (lambda: backends.canonical_name("glo"), "unknown backend 'glo': did you mean gloo?"),
    (lambda: backends.canonical_name("ncl"), "unknown backend 'ncl': did you mean nccl?"),
])
def test_did_you_mean_for_dtypes_devices_and_backends(call, message):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert message in str(info.value)
