"""The op table's ``tb.*`` functions, as ordinary definitions (``tb.add`` is ``add`` here).

GENERATED from ``tensorbrain/_ops/table.py`` by ``python tensorbrain/_ops/generate.py``: do not
edit by hand. Add or change an entry of ``OPS`` in ``table.py``, then rerun the generator;
``tests/test_tensor.py::test_generated_table_methods_are_current`` fails while this file is stale.

``tensorbrain/__init__.py`` star-imports this module (``__all__``).
"""
from __future__ import annotations

from . import blas as BL
from . import calculus as CA
from . import combine as CB
from . import joining as JN
from . import complex as C
from . import einsum as _einsum
from . import elementwise as E
from .. import _signal as SG
from .. import _linalg_legacy as LL
from .. import linalg as LA
from . import extra as X
from . import index_queries as IQ
from . import indexing as IX
from . import nn_extra as NX
from . import pointwise as P
from . import rearrange as RA
from . import reduce as R
from . import scatter as SC
from . import select as SL
from . import shape as S
from . import softmax as _softmax
from . import quantiles as QT
from . import stats as ST

__all__ = ["add", "sub", "mul", "div", "pow", "neg", "multiply", "divide", "subtract",
           "true_divide", "maximum", "minimum", "where", "exp", "log", "sqrt", "rsqrt", "abs",
           "absolute", "sign", "sin", "cos", "clamp", "clip", "relu", "sigmoid", "tanh", "gelu",
           "silu", "log1p", "expm1", "erf", "square", "reciprocal", "floor", "ceil", "trunc",
           "round", "isnan", "isinf", "isfinite", "logical_not", "masked_fill", "addcmul",
           "addcdiv", "lerp", "lt", "gt", "le", "ge", "eq", "ne", "sum", "mean", "max", "min",
           "amax", "argmax", "argmin", "var", "std", "logsumexp", "prod", "cumsum", "cumprod",
           "all", "any", "norm", "softmax", "log_softmax", "reshape", "flatten", "permute",
           "transpose", "swapaxes", "swapdims", "t", "squeeze", "unsqueeze", "clone", "cat",
           "concat", "stack", "split", "chunk", "narrow", "matmul", "mm", "bmm", "dot", "outer",
           "gather", "index_select", "tril", "triu", "flip", "sort", "argsort", "topk", "einsum",
           "amin", "clamp_min", "clamp_max", "logical_and", "logical_or", "logical_xor", "isclose",
           "unbind", "nan_to_num", "allclose", "equal", "scatter", "scatter_add", "index_add",
           "nonzero", "masked_select", "unique", "bincount", "count_nonzero", "take_along_dim",
           "median", "kthvalue", "roll", "diag", "trace", "repeat_interleave", "meshgrid", "kron",
           "acos", "arccos", "asin", "arcsin", "atan", "arctan", "acosh", "arccosh", "asinh",
           "arcsinh", "atanh", "arctanh", "tan", "sinh", "cosh", "log2", "log10", "exp2", "sinc",
           "deg2rad", "rad2deg", "erfc", "erfinv", "lgamma", "digamma", "frac", "negative",
           "positive", "sgn", "fix", "signbit", "isposinf", "isneginf", "isreal", "bitwise_not",
           "logit", "hardshrink", "mvlgamma", "atan2", "arctan2", "hypot", "fmod", "remainder",
           "floor_divide", "copysign", "xlogy", "logaddexp", "logaddexp2", "float_power", "fmax",
           "fmin", "ldexp", "nextafter", "heaviside", "gcd", "lcm", "bitwise_and", "bitwise_or",
           "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "greater", "greater_equal",
           "less", "less_equal", "not_equal", "view_as_real", "view_as_complex", "polar",
           "complex", "real", "imag", "conj", "conj_physical", "resolve_conj", "resolve_neg",
           "angle", "adjoint", "is_complex", "movedim", "moveaxis", "ravel", "tile",
           "broadcast_to", "select", "diagonal", "as_strided", "atleast_1d", "atleast_2d",
           "atleast_3d", "vstack", "row_stack", "hstack", "dstack", "column_stack", "tensor_split",
           "hsplit", "vsplit", "dsplit", "split_with_sizes", "fliplr", "unsafe_chunk",
           "unsafe_split", "unsafe_split_with_sizes", "narrow_copy", "flipud", "rot90",
           "broadcast_tensors", "block_diag", "cartesian_prod", "combinations", "diag_embed",
           "diagflat", "index_copy", "index_fill", "index_put", "masked_scatter", "take", "put",
           "select_scatter", "slice_scatter", "diagonal_scatter", "scatter_reduce", "searchsorted",
           "bucketize", "isin", "argwhere", "unique_consecutive", "tril_indices", "triu_indices",
           "nonzero_static", "index_reduce", "mode", "cummax", "cummin", "logcumsumexp", "nansum",
           "nanmean", "nanmedian", "quantile", "nanquantile", "std_mean", "var_mean", "aminmax",
           "histc", "histogram", "dist", "diff", "cov", "corrcoef", "renorm", "trapezoid", "trapz",
           "msort", "addmm", "addmv", "addr", "baddbmm", "addbmm", "mv", "inner", "vdot", "ger",
           "cross", "tensordot", "chain_matmul", "cdist", "det", "inverse", "slogdet", "logdet",
           "pinverse", "matrix_power", "matrix_exp", "cholesky", "qr", "svd", "cholesky_solve",
           "cholesky_inverse", "stft", "hann_window", "hamming_window", "blackman_window",
           "bartlett_window", "kaiser_window", "gradient", "fill", "expand_copy", "is_nonzero",
           "prelu"]

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
absolute = E.abs
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
swapaxes = S.transpose
swapdims = S.transpose
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
allclose = X.allclose
equal = X.equal
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
acos = P.acos
arccos = P.acos
asin = P.asin
arcsin = P.asin
atan = P.atan
arctan = P.atan
acosh = P.acosh
arccosh = P.acosh
asinh = P.asinh
arcsinh = P.asinh
atanh = P.atanh
arctanh = P.atanh
tan = P.tan
sinh = P.sinh
cosh = P.cosh
log2 = P.log2
log10 = P.log10
exp2 = P.exp2
sinc = P.sinc
deg2rad = P.deg2rad
rad2deg = P.rad2deg
erfc = P.erfc
erfinv = P.erfinv
lgamma = P.lgamma
digamma = P.digamma
frac = P.frac
negative = P.negative
positive = P.positive
sgn = P.sgn
fix = P.fix
signbit = P.signbit
isposinf = P.isposinf
isneginf = P.isneginf
isreal = P.isreal
bitwise_not = P.bitwise_not
logit = P.logit
hardshrink = P.hardshrink
mvlgamma = P.mvlgamma
atan2 = P.atan2
arctan2 = P.atan2
hypot = P.hypot
fmod = P.fmod
remainder = P.remainder
floor_divide = P.floor_divide
copysign = P.copysign
xlogy = P.xlogy
logaddexp = P.logaddexp
logaddexp2 = P.logaddexp2
float_power = P.float_power
fmax = P.fmax
fmin = P.fmin
ldexp = P.ldexp
nextafter = P.nextafter
heaviside = P.heaviside
gcd = P.gcd
lcm = P.lcm
bitwise_and = P.bitwise_and
bitwise_or = P.bitwise_or
bitwise_xor = P.bitwise_xor
bitwise_left_shift = P.bitwise_left_shift
bitwise_right_shift = P.bitwise_right_shift
greater = E.gt_
greater_equal = E.ge_
less = E.lt_
less_equal = E.le_
not_equal = E.ne_
view_as_real = C.view_as_real
view_as_complex = C.view_as_complex
polar = C.polar
complex = C.complex
real = C.real
imag = C.imag
conj = C.conj
conj_physical = C.conj
resolve_conj = C.resolve
resolve_neg = C.resolve
angle = C.angle
adjoint = C.adjoint
is_complex = C.is_complex
movedim = CB.movedim
moveaxis = CB.movedim
ravel = CB.ravel
tile = CB.tile
broadcast_to = CB.broadcast_to
select = CB.select
diagonal = CB.diagonal
as_strided = CB.as_strided
atleast_1d = JN.atleast_1d
atleast_2d = JN.atleast_2d
atleast_3d = JN.atleast_3d
vstack = JN.vstack
row_stack = JN.vstack
hstack = JN.hstack
dstack = JN.dstack
column_stack = JN.column_stack
tensor_split = JN.tensor_split
hsplit = JN.hsplit
vsplit = JN.vsplit
dsplit = JN.dsplit
split_with_sizes = JN.split_with_sizes
fliplr = CB.fliplr
unsafe_chunk = S.chunk
unsafe_split = S.split
unsafe_split_with_sizes = JN.split_with_sizes
narrow_copy = CB.narrow_copy
flipud = CB.flipud
rot90 = CB.rot90
broadcast_tensors = CB.broadcast_tensors
block_diag = CB.block_diag
cartesian_prod = CB.cartesian_prod
combinations = CB.combinations
diag_embed = CB.diag_embed
diagflat = CB.diagflat
index_copy = IX.index_copy
index_fill = IX.index_fill
index_put = IX.index_put
masked_scatter = IX.masked_scatter
take = IX.take
put = IX.put
select_scatter = IX.select_scatter
slice_scatter = IX.slice_scatter
diagonal_scatter = IX.diagonal_scatter
scatter_reduce = IX.scatter_reduce
searchsorted = IQ.searchsorted
bucketize = IQ.bucketize
isin = IQ.isin
argwhere = IQ.argwhere
unique_consecutive = IQ.unique_consecutive
tril_indices = IQ.tril_indices
triu_indices = IQ.triu_indices
nonzero_static = IQ.nonzero_static
index_reduce = IX.index_reduce
mode = ST.mode
cummax = ST.cummax
cummin = ST.cummin
logcumsumexp = ST.logcumsumexp
nansum = ST.nansum
nanmean = ST.nanmean
nanmedian = ST.nanmedian
quantile = QT.quantile
nanquantile = QT.nanquantile
std_mean = ST.std_mean
var_mean = ST.var_mean
aminmax = ST.aminmax
histc = QT.histc
histogram = QT.histogram
dist = ST.dist
diff = ST.diff
cov = ST.cov
corrcoef = ST.corrcoef
renorm = ST.renorm
trapezoid = ST.trapezoid
trapz = ST.trapezoid
msort = ST.msort
addmm = BL.addmm
addmv = BL.addmv
addr = BL.addr
baddbmm = BL.baddbmm
addbmm = BL.addbmm
mv = BL.mv
inner = BL.inner
vdot = BL.vdot
ger = BL.ger
cross = BL.cross
tensordot = BL.tensordot
chain_matmul = BL.chain_matmul
cdist = BL.cdist
det = LA.det
inverse = LA.inv
slogdet = LA.slogdet
logdet = LL.logdet
pinverse = LL.pinverse
matrix_power = LA.matrix_power
matrix_exp = LA.matrix_exp
cholesky = LL.legacy_cholesky
qr = LL.legacy_qr
svd = LL.legacy_svd
cholesky_solve = LL.cholesky_solve
cholesky_inverse = LL.cholesky_inverse
stft = SG.stft
hann_window = SG.hann_window
hamming_window = SG.hamming_window
blackman_window = SG.blackman_window
bartlett_window = SG.bartlett_window
kaiser_window = SG.kaiser_window
gradient = CA.gradient
fill = CA.fill
expand_copy = CA.expand_copy
is_nonzero = CA.is_nonzero
prelu = NX.prelu
