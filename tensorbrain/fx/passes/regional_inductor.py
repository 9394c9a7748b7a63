"""``torch.fx.passes.regional_inductor``: refused by name (it compiles regions of a graph with
Inductor; TensorBrain has no compiler and runs graphs eagerly)."""
from ..._unsupported import unsupported

regional_inductor = unsupported(
    "torch.fx.passes.regional_inductor.regional_inductor",
    "it compiles the graph's annotated regions with Inductor, and TensorBrain has no compiler",
    "the GraphModule as it is (it runs eagerly)")

__all__ = ["regional_inductor"]
