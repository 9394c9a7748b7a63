"""The op table's ``tb.*`` functions, as ordinary definitions (``tb.add`` is ``add`` here).

GENERATED from ``tensorbrain/_ops/table.py`` by ``python tensorbrain/_ops/generate.py``: do not
edit by hand. Add or change an entry of ``OPS`` in ``table.py``, then rerun the generator;
``tests/test_tensor.py::test_generated_table_methods_are_current`` fails while this file is stale.

``tensorbrain/__init__.py`` star-imports this module (``__all__``).
"""
from __future__ import annotations

from . import einsum as _einsum
from . import elementwise as E
from . import extra as X
from . import rearrange as RA
from . import reduce as R
from . import scatter as SC
from . import select as SL
from . import shape as S
from . import softmax as _softmax

__all__ = ["add", "sub", "mul", "div", "pow", "neg", "multiply", "divide", "subtract",
           "true_divide", "maximum", "minimum", "where", "exp", "log", "sqrt", "rsqrt", "abs",
           "sign", "sin", "cos", "clamp", "clip", "relu", "sigmoid", "tanh", "gelu", "silu",
           "log1p", "expm1", "erf", "square", "reciprocal", "floor", "ceil", "trunc", "round",
           "isnan", "isinf", "isfinite", "logical_not", "masked_fill", "addcmul", "addcdiv",
           "lerp", "lt", "gt", "le", "ge", "eq", "ne", "floor_divide", "remainder", "bitwise_and",
           "bitwise_or", "bitwise_xor", "bitwise_not", "sum", "mean", "max", "min", "amax",
           "argmax", "argmin", "var", "std", "logsumexp", "prod", "cumsum", "cumprod", "all",
           "any", "norm", "softmax", "log_softmax", "reshape", "flatten", "permute", "transpose",
           "t", "squeeze", "unsqueeze", "clone", "cat", "concat", "stack", "split", "chunk",
           "narrow", "matmul", "mm", "bmm", "dot", "outer", "gather", "index_select", "tril",
           "triu", "flip", "sort", "argsort", "topk", "einsum", "amin", "clamp_min", "clamp_max",
           "logical_and", "logical_or", "logical_xor", "isclose", "unbind", "nan_to_num",
           "scatter", "scatter_add", "index_add", "nonzero", "masked_select", "unique", "bincount",
           "count_nonzero", "take_along_dim", "median", "kthvalue", "roll", "diag", "trace",
           "repeat_interleave", "meshgrid", "kron"]

add = E.add
sub = E.sub
mul = E.mul
div = E.div
pow = E.pow
neg = E.neg
multiply = E.mul
divide = E.div
subtract = E.sub
true_divide = E.div
maximum = E.maximum
minimum = E.minimum
where = E.where
exp = E.exp
log = E.log
sqrt = E.sqrt
rsqrt = E.rsqrt
abs = E.abs
sign = E.sign
sin = E.sin
cos = E.cos
clamp = E.clamp
clip = E.clamp
relu = E.relu
sigmoid = E.sigmoid
tanh = E.tanh
gelu = E.gelu
silu = E.silu
log1p = E.log1p
expm1 = E.expm1
erf = E.erf
square = E.square
reciprocal = E.reciprocal
floor = E.floor
ceil = E.ceil
trunc = E.trunc
round = E.round
isnan = E.isnan
isinf = E.isinf
isfinite = E.isfinite
logical_not = E.logical_not
masked_fill = E.masked_fill
addcmul = E.addcmul
addcdiv = E.addcdiv
lerp = E.lerp
lt = E.lt_
gt = E.gt_
le = E.le_
ge = E.ge_
eq = E.eq_
ne = E.ne_
floor_divide = E.floor_divide
remainder = E.remainder
bitwise_and = E.bitwise_and
bitwise_or = E.bitwise_or
bitwise_xor = E.bitwise_xor
bitwise_not = E.bitwise_not
sum = R.sum
mean = R.mean
max = R.max
min = R.min
amax = R.amax
argmax = R.argmax
argmin = R.argmin
var = R.var
std = R.std
logsumexp = R.logsumexp
prod = R.prod
cumsum = R.cumsum
cumprod = R.cumprod
all = R.all
any = R.any
norm = R.norm
softmax = _softmax.softmax
log_softmax = _softmax.log_softmax
reshape = S.reshape
flatten = S.flatten
permute = S.permute
transpose = S.transpose
t = S.t
squeeze = S.squeeze
unsqueeze = S.unsqueeze
clone = S.clone
cat = S.cat
concat = S.cat
stack = S.stack
split = S.split
chunk = S.chunk
narrow = S.narrow
matmul = S.matmul
mm = S.matmul
bmm = S.matmul
dot = S.dot
outer = S.outer
gather = S.gather
index_select = S.index_select
tril = S.tril
triu = S.triu
flip = S.flip
sort = S.sort
argsort = S.argsort
topk = S.topk
einsum = _einsum.einsum
amin = X.amin
clamp_min = X.clamp_min
clamp_max = X.clamp_max
logical_and = X.logical_and
logical_or = X.logical_or
logical_xor = X.logical_xor
isclose = X.isclose
unbind = X.unbind
nan_to_num = X.nan_to_num
scatter = SC.scatter
scatter_add = SC.scatter_add
index_add = SC.index_add
nonzero = SL.nonzero
masked_select = SL.masked_select
unique = SL.unique
bincount = SL.bincount
count_nonzero = SL.count_nonzero
take_along_dim = SL.take_along_dim
median = SL.median
kthvalue = SL.kthvalue
roll = RA.roll
diag = RA.diag
trace = RA.trace
repeat_interleave = RA.repeat_interleave
meshgrid = RA.meshgrid
kron = RA.kron
