"""The ``workers`` fixture of the distributed tests, for the benchmark tests."""
from tests.distributed.conftest import workers  # noqa: F401
