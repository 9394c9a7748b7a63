"""Small torch names added by use (issue 29): each against torch where torch has a value to
compare, else against what torch documents."""
import pytest

import tensorbrain as tb


def test_unsigned_dtypes_match_torch():
    torch = pytest.importorskip("torch")
    for name in ("uint16", "uint32", "uint64"):
        ours, theirs = getattr(tb, name), getattr(torch, name)
        assert tb.iinfo(ours).max == torch.iinfo(theirs).max
        assert tb.iinfo(ours).bits == torch.iinfo(theirs).bits
        assert tb.zeros(3, dtype=ours).dtype == ours


def test_elastic_utils_and_constants():
    torch = pytest.importorskip("torch")
    from torch.distributed.elastic.utils import macros as tmacros

    from tensorbrain.distributed.constants import default_pg_timeout
    from tensorbrain.distributed.elastic.utils.distributed import get_free_port
    from tensorbrain.distributed.elastic.utils.logging import get_logger
    from tensorbrain.distributed.elastic.utils import macros
    assert default_pg_timeout == torch.distributed.constants.default_pg_timeout
    args = ["--lr", "0.1", f"--rank={macros.local_rank}"]
    assert macros.substitute(args, "2") == tmacros.substitute(args, "2")
    port = get_free_port()
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))   # it was free
    assert get_logger().name == __name__


def test_profiler_legacy_itt_and_kineto():
    from tensorbrain._unsupported import NotSupportedError
    from tensorbrain.autograd import profiler, profiler_legacy
    assert profiler_legacy.profile is profiler.profile
    with profiler.emit_itt(enabled=False):
        pass
    with pytest.raises(NotSupportedError, match="emit_itt is not supported"):
        with profiler.emit_itt():
            pass
    assert tb.profiler.kineto_available()


def test_checkpoint_api_names():
    from tensorbrain.distributed.checkpoint.api import WRAPPED_EXCEPTION, CheckpointException
    assert issubclass(CheckpointException, RuntimeError)
    assert WRAPPED_EXCEPTION.__origin__ is tuple
