"""The fault-injection suite (docs/reliability.md): real processes, real signals, hard timeouts.

``python -m pytest tests/distributed/faults`` is the quick run CI does (under ~3 minutes on 2
cores). ``TB_FAULTS_SOAK=N`` (N > 1) turns on the long mode: N times the repetitions of each
kill/freeze scenario, N times the mutated checkpoint files and crafted payloads (see
docs/reliability.md). The parent conftest provides the ``workers`` and ``run_id`` fixtures.
"""
import os

import pytest


@pytest.fixture
def soak() -> int:
    """Repetition factor: 1 in the quick run, N with TB_FAULTS_SOAK=N."""
    env = os.environ.get("TB_FAULTS_SOAK", "")
    return max(1, int(env)) if env.isdigit() else 1
