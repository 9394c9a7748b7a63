"""Shared test configuration: the `gpu` marker skips cleanly on machines without a GPU."""
import pytest

import tensorbrain as tb


def pytest_collection_modifyitems(config, items):
    if tb.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"no GPU: {tb.cuda.why_unavailable()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
