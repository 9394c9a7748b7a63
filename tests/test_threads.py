"""tb.set_num_threads / get_num_threads (torch's names; Horovod's examples call
torch.set_num_threads(1) in every worker)."""
import pytest

import tensorbrain as tb


def test_set_and_get_num_threads():
    before = tb.get_num_threads()
    try:
        tb.set_num_threads(1)
        assert tb.get_num_threads() == 1
        try:
            from threadpoolctl import threadpool_info
        except ImportError:
            threadpool_info = None
        if threadpool_info is not None:   # the BLAS pools were resized
            assert all(p["num_threads"] == 1 for p in threadpool_info()
                       if p["user_api"] == "blas")
        with pytest.raises(ValueError, match="positive"):
            tb.set_num_threads(0)
        tb.set_num_interop_threads(2)
        assert tb.get_num_interop_threads() == 2
    finally:
        tb.set_num_threads(before)
