"""``torch.fx.passes.runtime_assert``: refused by name. ``insert_deferred_runtime_asserts``
turns a ``ShapeEnv``'s deferred symbolic-shape guards into assert nodes; TensorBrain has no
symbolic shapes (``ShapeEnv`` is refused), so there is nothing to insert from."""
from ..._unsupported import unsupported

insert_deferred_runtime_asserts = unsupported(
    "torch.fx.passes.runtime_assert.insert_deferred_runtime_asserts",
    "it needs a ShapeEnv of symbolic shapes, which TensorBrain does not have (every shape is "
    "concrete)", "the graph unchanged: with concrete shapes there are no deferred asserts")

__all__ = ["insert_deferred_runtime_asserts"]
