"""``tb.utils``: ``tb.utils.data`` (data sets, samplers, DataLoader), ``checkpoint``, ``hooks``,
``benchmark``, ``collect_env``, ``model_zoo``, ``flop_counter``, ``cpp_extension`` (refused), ``swap_tensors``."""
from . import data  # noqa: F401
from . import dlpack  # noqa: F401,E402  (tb.utils.dlpack, as torch.utils.dlpack)


def swap_tensors(t1, t2) -> None:
    """Swap the two tensors' contents and attributes in place (every reference to ``t1`` then
    sees ``t2``'s data, gradient and graph), as ``torch.utils.swap_tensors``.

    Args:
        t1: a tensor.
        t2: a tensor.

    Raises:
        TypeError: the two are not both tensors.
    """
    from ..tensor import Tensor
    if not (isinstance(t1, Tensor) and isinstance(t2, Tensor)):
        raise TypeError(f"Expected two tensors, got {type(t1).__name__} and "
                        f"{type(t2).__name__}")
    for slot in ("_data", "requires_grad", "grad", "grad_fn", "_version", "_hooks",
                 "_post_acc_hooks", "_base"):
        a, b = getattr(t1, slot), getattr(t2, slot)
        setattr(t1, slot, b)
        setattr(t2, slot, a)
    t1.__dict__, t2.__dict__ = t2.__dict__, t1.__dict__
    if type(t1) is not type(t2):
        t1.__class__, t2.__class__ = t2.__class__, t1.__class__


def __getattr__(name):
    # torch's utils submodules, loaded on first use
    if name in ("hooks", "benchmark", "collect_env", "model_zoo", "cpp_extension", "checkpoint",
                "deterministic",
                "flop_counter"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tensorbrain.utils' has no attribute {name!r}")
