"""The ``workers`` fixture of the distributed tests, for the profiler's distributed test."""
from tests.distributed.conftest import workers  # noqa: F401
