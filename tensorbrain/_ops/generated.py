"""The op table's Tensor methods, as ordinary definitions.

GENERATED from ``tensorbrain/_ops/table.py`` by ``python tensorbrain/_ops/generate.py``: do not
edit by hand. Add or change an entry of ``OPS`` in ``table.py``, then rerun the generator;
``tests/test_tensor.py::test_generated_table_methods_are_current`` fails while this file is stale.

``TableMethods`` is a base class of ``tensorbrain.tensor.Tensor``: a table method is the op
itself (the tensor is its first argument), an in-place form (``log_ = _inplace_form("log_",
E.log)``) runs the op through ``TensorBase._inplace``.
"""
from __future__ import annotations

from . import blas as BL
from . import calculus as CA
from . import combine as CB
from . import joining as JN
from . import complex as C
from . import convert as CV
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
from . import quantiles as QT
from . import stats as ST


def _inplace_form(name: str, op):
    """The in-place method ``name`` (``log_``) of ``op`` (``E.log``): ``self`` becomes
    ``op(self, ...)``, through ``TensorBase._inplace`` (autograd's version check included)."""
    def method(self, *args, **kwargs):
        return self._inplace(name, lambda s: op(s, *args, **kwargs), *args, *kwargs.values())
    base = name[:-1]
    method.__name__, method.__qualname__ = name, f"TableMethods.{name}"
    method.__doc__ = f"""In-place ``{base}`` (``torch.Tensor.{name}``): ``self`` becomes
    ``self.{base}(...)``.

    Args:
        *args: ``{base}``'s arguments after the tensor.
        **kwargs: ``{base}``'s keyword arguments.

    Returns:
        Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
    """
    return method


class TableMethods:
    """The op table's Tensor methods (see the module docstring).

    Requires, from ``TensorBase``: ``_inplace(name, result_fn, *others)``.
    """

    __slots__ = ()

    # ***** elementwise *****
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

    # ***** reductions *****
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

    # ***** shape, indexing, linear algebra *****
    reshape = S.reshape
    view = S.view
    flatten = S.flatten
    unflatten = S.unflatten
    permute = S.permute
    transpose = S.transpose
    swapaxes = S.transpose
    swapdims = S.transpose
    t = S.t
    squeeze = S.squeeze
    unsqueeze = S.unsqueeze
    expand = S.expand
    expand_as = S.expand_as
    contiguous = S.contiguous
    clone = S.clone
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
    repeat = S.repeat
    flip = S.flip
    sort = S.sort
    argsort = S.argsort
    topk = S.topk

    # ***** composites (extra.py) *****
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

    # ***** writing at indices (scatter.py) *****
    scatter = SC.scatter
    scatter_add = SC.scatter_add
    index_add = SC.index_add

    # ***** picking and counting (select.py) *****
    nonzero = SL.nonzero
    masked_select = SL.masked_select
    unique = SL.unique
    bincount = SL.bincount
    count_nonzero = SL.count_nonzero
    take_along_dim = SL.take_along_dim
    median = SL.median
    kthvalue = SL.kthvalue

    # ***** moving and repeating (rearrange.py) *****
    roll = RA.roll
    diag = RA.diag
    trace = RA.trace
    repeat_interleave = RA.repeat_interleave
    kron = RA.kron

    # ***** the long tail of elementwise math (pointwise.py) *****
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

    # ***** complex numbers (complex.py) *****
    conj = C.conj
    conj_physical = C.conj
    resolve_conj = C.resolve
    resolve_neg = C.resolve
    angle = C.angle
    adjoint = C.adjoint

    # ***** dtype conversions by name (convert.py) *****
    byte = CV.byte
    char = CV.char
    short = CV.short
    cfloat = CV.cfloat
    cdouble = CV.cdouble

    # ***** reshaping, joining, splitting (combine.py, joining.py) *****
    movedim = CB.movedim
    moveaxis = CB.movedim
    ravel = CB.ravel
    tile = CB.tile
    broadcast_to = CB.broadcast_to
    select = CB.select
    diagonal = CB.diagonal
    unfold = CB.unfold
    as_strided = CB.as_strided
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
    diag_embed = CB.diag_embed
    diagflat = CB.diagflat

    # ***** reading and writing at indices (indexing.py, index_queries.py) *****
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
    argwhere = IQ.argwhere
    unique_consecutive = IQ.unique_consecutive
    nonzero_static = IQ.nonzero_static
    index_reduce = IX.index_reduce

    # ***** statistics (stats.py, quantiles.py) *****
    mode = ST.mode
    cummax = ST.cummax
    cummin = ST.cummin
    logcumsumexp = ST.logcumsumexp
    nansum = ST.nansum
    nanmean = ST.nanmean
    nanmedian = ST.nanmedian
    quantile = QT.quantile
    nanquantile = QT.nanquantile
    aminmax = ST.aminmax
    histc = QT.histc
    histogram = QT.histogram
    dist = ST.dist
    diff = ST.diff
    cov = ST.cov
    corrcoef = ST.corrcoef
    renorm = ST.renorm
    msort = ST.msort
    sum_to_size = ST.sum_to_size

    # ***** matrix products (blas.py) *****
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

    # ***** linear algebra in the torch namespace (tensorbrain/linalg.py, _linalg_legacy.py) *****
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

    # ***** signal processing (tensorbrain/_signal.py) *****
    stft = SG.stft

    # ***** long tail of the scanned programs (calculus.py, nn_extra.py) *****
    is_nonzero = CA.is_nonzero
    prelu = NX.prelu

    # ***** in-place forms *****
    multiply_ = _inplace_form("multiply_", E.mul)
    divide_ = _inplace_form("divide_", E.div)
    subtract_ = _inplace_form("subtract_", E.sub)
    true_divide_ = _inplace_form("true_divide_", E.div)
    log_ = _inplace_form("log_", E.log)
    rsqrt_ = _inplace_form("rsqrt_", E.rsqrt)
    abs_ = _inplace_form("abs_", E.abs)
    absolute_ = _inplace_form("absolute_", E.abs)
    sign_ = _inplace_form("sign_", E.sign)
    sin_ = _inplace_form("sin_", E.sin)
    cos_ = _inplace_form("cos_", E.cos)
    clip_ = _inplace_form("clip_", E.clamp)
    sigmoid_ = _inplace_form("sigmoid_", E.sigmoid)
    tanh_ = _inplace_form("tanh_", E.tanh)
    log1p_ = _inplace_form("log1p_", E.log1p)
    expm1_ = _inplace_form("expm1_", E.expm1)
    erf_ = _inplace_form("erf_", E.erf)
    square_ = _inplace_form("square_", E.square)
    reciprocal_ = _inplace_form("reciprocal_", E.reciprocal)
    floor_ = _inplace_form("floor_", E.floor)
    ceil_ = _inplace_form("ceil_", E.ceil)
    trunc_ = _inplace_form("trunc_", E.trunc)
    round_ = _inplace_form("round_", E.round)
    logical_not_ = _inplace_form("logical_not_", E.logical_not)
    masked_fill_ = _inplace_form("masked_fill_", E.masked_fill)
    addcmul_ = _inplace_form("addcmul_", E.addcmul)
    addcdiv_ = _inplace_form("addcdiv_", E.addcdiv)
    lerp_ = _inplace_form("lerp_", E.lerp)
    lt_ = _inplace_form("lt_", E.lt_)
    gt_ = _inplace_form("gt_", E.gt_)
    le_ = _inplace_form("le_", E.le_)
    ge_ = _inplace_form("ge_", E.ge_)
    eq_ = _inplace_form("eq_", E.eq_)
    ne_ = _inplace_form("ne_", E.ne_)
    cumsum_ = _inplace_form("cumsum_", R.cumsum)
    cumprod_ = _inplace_form("cumprod_", R.cumprod)
    tril_ = _inplace_form("tril_", S.tril)
    triu_ = _inplace_form("triu_", S.triu)
    clamp_min_ = _inplace_form("clamp_min_", X.clamp_min)
    clamp_max_ = _inplace_form("clamp_max_", X.clamp_max)
    logical_and_ = _inplace_form("logical_and_", X.logical_and)
    logical_or_ = _inplace_form("logical_or_", X.logical_or)
    logical_xor_ = _inplace_form("logical_xor_", X.logical_xor)
    nan_to_num_ = _inplace_form("nan_to_num_", X.nan_to_num)
    scatter_ = _inplace_form("scatter_", SC.scatter)
    scatter_add_ = _inplace_form("scatter_add_", SC.scatter_add)
    index_add_ = _inplace_form("index_add_", SC.index_add)
    acos_ = _inplace_form("acos_", P.acos)
    arccos_ = _inplace_form("arccos_", P.acos)
    asin_ = _inplace_form("asin_", P.asin)
    arcsin_ = _inplace_form("arcsin_", P.asin)
    atan_ = _inplace_form("atan_", P.atan)
    arctan_ = _inplace_form("arctan_", P.atan)
    acosh_ = _inplace_form("acosh_", P.acosh)
    arccosh_ = _inplace_form("arccosh_", P.acosh)
    asinh_ = _inplace_form("asinh_", P.asinh)
    arcsinh_ = _inplace_form("arcsinh_", P.asinh)
    atanh_ = _inplace_form("atanh_", P.atanh)
    arctanh_ = _inplace_form("arctanh_", P.atanh)
    tan_ = _inplace_form("tan_", P.tan)
    sinh_ = _inplace_form("sinh_", P.sinh)
    cosh_ = _inplace_form("cosh_", P.cosh)
    log2_ = _inplace_form("log2_", P.log2)
    log10_ = _inplace_form("log10_", P.log10)
    exp2_ = _inplace_form("exp2_", P.exp2)
    sinc_ = _inplace_form("sinc_", P.sinc)
    deg2rad_ = _inplace_form("deg2rad_", P.deg2rad)
    rad2deg_ = _inplace_form("rad2deg_", P.rad2deg)
    erfc_ = _inplace_form("erfc_", P.erfc)
    erfinv_ = _inplace_form("erfinv_", P.erfinv)
    lgamma_ = _inplace_form("lgamma_", P.lgamma)
    digamma_ = _inplace_form("digamma_", P.digamma)
    frac_ = _inplace_form("frac_", P.frac)
    negative_ = _inplace_form("negative_", P.negative)
    sgn_ = _inplace_form("sgn_", P.sgn)
    fix_ = _inplace_form("fix_", P.fix)
    bitwise_not_ = _inplace_form("bitwise_not_", P.bitwise_not)
    logit_ = _inplace_form("logit_", P.logit)
    mvlgamma_ = _inplace_form("mvlgamma_", P.mvlgamma)
    atan2_ = _inplace_form("atan2_", P.atan2)
    arctan2_ = _inplace_form("arctan2_", P.atan2)
    hypot_ = _inplace_form("hypot_", P.hypot)
    fmod_ = _inplace_form("fmod_", P.fmod)
    remainder_ = _inplace_form("remainder_", P.remainder)
    floor_divide_ = _inplace_form("floor_divide_", P.floor_divide)
    copysign_ = _inplace_form("copysign_", P.copysign)
    xlogy_ = _inplace_form("xlogy_", P.xlogy)
    float_power_ = _inplace_form("float_power_", P.float_power)
    ldexp_ = _inplace_form("ldexp_", P.ldexp)
    nextafter_ = _inplace_form("nextafter_", P.nextafter)
    heaviside_ = _inplace_form("heaviside_", P.heaviside)
    gcd_ = _inplace_form("gcd_", P.gcd)
    lcm_ = _inplace_form("lcm_", P.lcm)
    bitwise_and_ = _inplace_form("bitwise_and_", P.bitwise_and)
    bitwise_or_ = _inplace_form("bitwise_or_", P.bitwise_or)
    bitwise_xor_ = _inplace_form("bitwise_xor_", P.bitwise_xor)
    bitwise_left_shift_ = _inplace_form("bitwise_left_shift_", P.bitwise_left_shift)
    bitwise_right_shift_ = _inplace_form("bitwise_right_shift_", P.bitwise_right_shift)
    greater_ = _inplace_form("greater_", E.gt_)
    greater_equal_ = _inplace_form("greater_equal_", E.ge_)
    less_ = _inplace_form("less_", E.lt_)
    less_equal_ = _inplace_form("less_equal_", E.le_)
    not_equal_ = _inplace_form("not_equal_", E.ne_)
    conj_physical_ = _inplace_form("conj_physical_", C.conj)
    index_copy_ = _inplace_form("index_copy_", IX.index_copy)
    index_fill_ = _inplace_form("index_fill_", IX.index_fill)
    index_put_ = _inplace_form("index_put_", IX.index_put)
    masked_scatter_ = _inplace_form("masked_scatter_", IX.masked_scatter)
    put_ = _inplace_form("put_", IX.put)
    scatter_reduce_ = _inplace_form("scatter_reduce_", IX.scatter_reduce)
    index_reduce_ = _inplace_form("index_reduce_", IX.index_reduce)
    renorm_ = _inplace_form("renorm_", ST.renorm)
    addmm_ = _inplace_form("addmm_", BL.addmm)
    addmv_ = _inplace_form("addmv_", BL.addmv)
    addr_ = _inplace_form("addr_", BL.addr)
    baddbmm_ = _inplace_form("baddbmm_", BL.baddbmm)
    addbmm_ = _inplace_form("addbmm_", BL.addbmm)
