"""``tb.fx.passes`` (``torch.fx.passes``): the graph passes programs import. Those that need
torch's compiler stack are refused by name: :mod:`.regional_inductor` (Inductor) and
:mod:`.runtime_assert` (symbolic-shape asserts from a ``ShapeEnv``, which TensorBrain, having
no symbolic shapes, never holds)."""
from . import regional_inductor, runtime_assert, split_utils  # noqa: F401

__all__ = ["regional_inductor", "runtime_assert", "split_utils"]
