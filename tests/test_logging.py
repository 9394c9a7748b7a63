"""TB_LOG_LEVEL and the tensorbrain loggers; TB_DISTRIBUTED_DEBUG validation (fresh interpreters,
since the level is read at import)."""
import os
import subprocess
import sys

import pytest

from tensorbrain import _config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EMIT = ("import tensorbrain, logging\n"
        "from tensorbrain._logging import get_logger\n"
        "for name in ('tensorbrain', 'tensorbrain.distributed', 'tensorbrain.nn'):\n"
        "    log = get_logger(name)\n"
        "    log.debug('d-' + name); log.info('i-' + name); log.warning('w-' + name)\n"
        "    log.error('e-' + name)\n")


def _run(code, **env):
    full = dict(os.environ, PYTHONPATH=ROOT)
    for k in ("TB_LOG_LEVEL", "TB_DISTRIBUTED_DEBUG", "TB_TIMELINE"):
        full.pop(k, None)
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("level,shown", [
    ("DEBUG", "diwe"), ("info", "iwe"), ("WARNING", "we"), ("ERROR", "e"), (None, "we")])
def test_level_filters_records(level, shown):
    out = _run(EMIT, **({} if level is None else {"TB_LOG_LEVEL": level}))
    assert out.returncode == 0, out.stderr
    for kind in "diwe":
        for name in ("tensorbrain", "tensorbrain.distributed", "tensorbrain.nn"):
            line = f"{kind}-{name}"
            assert (line in out.stderr) == (kind in shown), (level, line, out.stderr)
    names = {"d": "DEBUG", "i": "INFO", "w": "WARNING", "e": "ERROR"}
    assert (f"[tensorbrain] {names[shown[0]]} tensorbrain.nn: {shown[0]}-tensorbrain.nn"
            in out.stderr)


def test_debug_info_lowers_only_the_distributed_logger():
    out = _run(EMIT, TB_DISTRIBUTED_DEBUG="INFO")
    assert "i-tensorbrain.distributed" in out.stderr and "i-tensorbrain.nn" not in out.stderr


@pytest.mark.parametrize("var,value,allowed", [
    ("TB_LOG_LEVEL", "verbose", "DEBUG, INFO, WARNING, ERROR"),
    ("TB_DISTRIBUTED_DEBUG", "detial", "OFF, INFO, DETAIL")])
def test_invalid_values_name_the_allowed_ones(var, value, allowed):
    out = _run("import tensorbrain", **{var: value})
    assert out.returncode != 0
    assert f"environment variable {var}='{value}' is invalid: expected one of {allowed}" in out.stderr
    with pytest.raises(ValueError, match=allowed):
        _config.get(var, env={var: value})


def test_records_carry_the_rank_once_a_group_exists():
    code = ("import tensorbrain.distributed as dist\n"
            "from tensorbrain._logging import get_logger\n"
            "get_logger('tensorbrain.distributed').warning('before')\n"
            "dist.init_process_group('tcp', store=dist.HashStore(), rank=0, world_size=1)\n"
            "get_logger('tensorbrain.distributed').warning('after')\n"
            "dist.destroy_process_group()\n")
    out = _run(code)
    assert "[tensorbrain] WARNING tensorbrain.distributed: before" in out.stderr, out.stderr
    assert "[tensorbrain rank 0] WARNING tensorbrain.distributed: after" in out.stderr


def test_tbrun_notices_go_through_the_logger():
    code = "from tensorbrain.distributed.run import notice\nnotice('hello')\n"
    assert "tbrun: hello" in _run(code).stderr
    assert "tbrun: hello" not in _run(code, TB_LOG_LEVEL="ERROR").stderr
