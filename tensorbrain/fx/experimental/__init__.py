"""``tb.fx.experimental`` (``torch.fx.experimental``): the symbolic-shape helpers programs call
on sizes (``symbolic_shapes``), which in TensorBrain always see concrete values, and
``proxy_tensor.make_fx``, refused by name."""
from . import proxy_tensor, symbolic_shapes  # noqa: F401
