"""``tb.fx.experimental.proxy_tensor``: ``make_fx`` is refused by name (it traces through
torch's dispatcher down to aten operators, which TensorBrain does not have)."""
from ..._unsupported import unsupported

make_fx = unsupported("torch.fx.experimental.proxy_tensor.make_fx",
                      "TensorBrain has no aten-level dispatcher to trace through",
                      "tb.fx.symbolic_trace(fn), which records tb-level calls")
