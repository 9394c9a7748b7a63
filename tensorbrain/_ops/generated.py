"""The op table's Tensor methods, as ordinary definitions.

GENERATED from ``tensorbrain/_ops/table.py`` by ``python tensorbrain/_ops/generate.py``: do not
edit by hand. Add or change an entry of ``OPS`` in ``table.py``, then rerun the generator;
``tests/test_tensor.py::test_generated_table_methods_are_current`` fails while this file is stale.

``TableMethods`` is a base class of ``tensorbrain.tensor.Tensor``: a table method is the op
itself (the tensor is its first argument), an in-place form runs the op through
``TensorBase._inplace``.
"""
from __future__ import annotations

from . import blas as BL
from . import calculus as CA
from . import combine as CB
from . import complex as C
from . import convert as CV
from . import elementwise as E
from .. import _signal as SG
from .. import linalg as LA
from . import extra as X
from . import indexing as IX
from . import nn_extra as NX
from . import pointwise as P
from . import rearrange as RA
from . import reduce as R
from . import scatter as SC
from . import select as SL
from . import shape as S
from . import stats as ST


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

    # ***** reshaping, joining, splitting (combine.py) *****
    movedim = CB.movedim
    moveaxis = CB.movedim
    ravel = CB.ravel
    tile = CB.tile
    broadcast_to = CB.broadcast_to
    select = CB.select
    diagonal = CB.diagonal
    unfold = CB.unfold
    as_strided = CB.as_strided
    tensor_split = CB.tensor_split
    hsplit = CB.hsplit
    vsplit = CB.vsplit
    dsplit = CB.dsplit
    split_with_sizes = CB.split_with_sizes
    fliplr = CB.fliplr
    unsafe_chunk = S.chunk
    unsafe_split = S.split
    unsafe_split_with_sizes = CB.split_with_sizes
    narrow_copy = CB.narrow_copy
    flipud = CB.flipud
    rot90 = CB.rot90
    diag_embed = CB.diag_embed
    diagflat = CB.diagflat

    # ***** reading and writing at indices (indexing.py) *****
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
    argwhere = IX.argwhere
    unique_consecutive = IX.unique_consecutive
    nonzero_static = IX.nonzero_static
    index_reduce = IX.index_reduce

    # ***** statistics (stats.py) *****
    mode = ST.mode
    cummax = ST.cummax
    cummin = ST.cummin
    logcumsumexp = ST.logcumsumexp
    nansum = ST.nansum
    nanmean = ST.nanmean
    nanmedian = ST.nanmedian
    quantile = ST.quantile
    nanquantile = ST.nanquantile
    aminmax = ST.aminmax
    histc = ST.histc
    histogram = ST.histogram
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

    # ***** linear algebra in the torch namespace (tensorbrain/linalg.py) *****
    det = LA.det
    inverse = LA.inv
    slogdet = LA.slogdet
    logdet = LA.logdet
    pinverse = LA.pinverse
    matrix_power = LA.matrix_power
    matrix_exp = LA.matrix_exp
    cholesky = LA.legacy_cholesky
    qr = LA.legacy_qr
    svd = LA.legacy_svd
    cholesky_solve = LA.cholesky_solve
    cholesky_inverse = LA.cholesky_inverse

    # ***** signal processing (tensorbrain/_signal.py) *****
    stft = SG.stft

    # ***** long tail of the scanned programs (calculus.py, nn_extra.py) *****
    is_nonzero = CA.is_nonzero
    prelu = NX.prelu

    # ***** in-place forms *****
    def multiply_(self, *args, **kwargs):
        """In-place ``multiply`` (``torch.Tensor.multiply_``): ``self`` becomes ``self.multiply(...)``.

        Args:
            *args: ``multiply``'s arguments after the tensor.
            **kwargs: ``multiply``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("multiply_", lambda s: E.mul(s, *args, **kwargs), *args, *kwargs.values())

    def divide_(self, *args, **kwargs):
        """In-place ``divide`` (``torch.Tensor.divide_``): ``self`` becomes ``self.divide(...)``.

        Args:
            *args: ``divide``'s arguments after the tensor.
            **kwargs: ``divide``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("divide_", lambda s: E.div(s, *args, **kwargs), *args, *kwargs.values())

    def subtract_(self, *args, **kwargs):
        """In-place ``subtract`` (``torch.Tensor.subtract_``): ``self`` becomes ``self.subtract(...)``.

        Args:
            *args: ``subtract``'s arguments after the tensor.
            **kwargs: ``subtract``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("subtract_", lambda s: E.sub(s, *args, **kwargs), *args, *kwargs.values())

    def true_divide_(self, *args, **kwargs):
        """In-place ``true_divide`` (``torch.Tensor.true_divide_``): ``self`` becomes ``self.true_divide(...)``.

        Args:
            *args: ``true_divide``'s arguments after the tensor.
            **kwargs: ``true_divide``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("true_divide_", lambda s: E.div(s, *args, **kwargs), *args, *kwargs.values())

    def log_(self, *args, **kwargs):
        """In-place ``log`` (``torch.Tensor.log_``): ``self`` becomes ``self.log(...)``.

        Args:
            *args: ``log``'s arguments after the tensor.
            **kwargs: ``log``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("log_", lambda s: E.log(s, *args, **kwargs), *args, *kwargs.values())

    def rsqrt_(self, *args, **kwargs):
        """In-place ``rsqrt`` (``torch.Tensor.rsqrt_``): ``self`` becomes ``self.rsqrt(...)``.

        Args:
            *args: ``rsqrt``'s arguments after the tensor.
            **kwargs: ``rsqrt``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("rsqrt_", lambda s: E.rsqrt(s, *args, **kwargs), *args, *kwargs.values())

    def abs_(self, *args, **kwargs):
        """In-place ``abs`` (``torch.Tensor.abs_``): ``self`` becomes ``self.abs(...)``.

        Args:
            *args: ``abs``'s arguments after the tensor.
            **kwargs: ``abs``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("abs_", lambda s: E.abs(s, *args, **kwargs), *args, *kwargs.values())

    def absolute_(self, *args, **kwargs):
        """In-place ``absolute`` (``torch.Tensor.absolute_``): ``self`` becomes ``self.absolute(...)``.

        Args:
            *args: ``absolute``'s arguments after the tensor.
            **kwargs: ``absolute``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("absolute_", lambda s: E.abs(s, *args, **kwargs), *args, *kwargs.values())

    def sign_(self, *args, **kwargs):
        """In-place ``sign`` (``torch.Tensor.sign_``): ``self`` becomes ``self.sign(...)``.

        Args:
            *args: ``sign``'s arguments after the tensor.
            **kwargs: ``sign``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("sign_", lambda s: E.sign(s, *args, **kwargs), *args, *kwargs.values())

    def sin_(self, *args, **kwargs):
        """In-place ``sin`` (``torch.Tensor.sin_``): ``self`` becomes ``self.sin(...)``.

        Args:
            *args: ``sin``'s arguments after the tensor.
            **kwargs: ``sin``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("sin_", lambda s: E.sin(s, *args, **kwargs), *args, *kwargs.values())

    def cos_(self, *args, **kwargs):
        """In-place ``cos`` (``torch.Tensor.cos_``): ``self`` becomes ``self.cos(...)``.

        Args:
            *args: ``cos``'s arguments after the tensor.
            **kwargs: ``cos``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("cos_", lambda s: E.cos(s, *args, **kwargs), *args, *kwargs.values())

    def clip_(self, *args, **kwargs):
        """In-place ``clip`` (``torch.Tensor.clip_``): ``self`` becomes ``self.clip(...)``.

        Args:
            *args: ``clip``'s arguments after the tensor.
            **kwargs: ``clip``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("clip_", lambda s: E.clamp(s, *args, **kwargs), *args, *kwargs.values())

    def sigmoid_(self, *args, **kwargs):
        """In-place ``sigmoid`` (``torch.Tensor.sigmoid_``): ``self`` becomes ``self.sigmoid(...)``.

        Args:
            *args: ``sigmoid``'s arguments after the tensor.
            **kwargs: ``sigmoid``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("sigmoid_", lambda s: E.sigmoid(s, *args, **kwargs), *args, *kwargs.values())

    def tanh_(self, *args, **kwargs):
        """In-place ``tanh`` (``torch.Tensor.tanh_``): ``self`` becomes ``self.tanh(...)``.

        Args:
            *args: ``tanh``'s arguments after the tensor.
            **kwargs: ``tanh``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("tanh_", lambda s: E.tanh(s, *args, **kwargs), *args, *kwargs.values())

    def log1p_(self, *args, **kwargs):
        """In-place ``log1p`` (``torch.Tensor.log1p_``): ``self`` becomes ``self.log1p(...)``.

        Args:
            *args: ``log1p``'s arguments after the tensor.
            **kwargs: ``log1p``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("log1p_", lambda s: E.log1p(s, *args, **kwargs), *args, *kwargs.values())

    def expm1_(self, *args, **kwargs):
        """In-place ``expm1`` (``torch.Tensor.expm1_``): ``self`` becomes ``self.expm1(...)``.

        Args:
            *args: ``expm1``'s arguments after the tensor.
            **kwargs: ``expm1``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("expm1_", lambda s: E.expm1(s, *args, **kwargs), *args, *kwargs.values())

    def erf_(self, *args, **kwargs):
        """In-place ``erf`` (``torch.Tensor.erf_``): ``self`` becomes ``self.erf(...)``.

        Args:
            *args: ``erf``'s arguments after the tensor.
            **kwargs: ``erf``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("erf_", lambda s: E.erf(s, *args, **kwargs), *args, *kwargs.values())

    def square_(self, *args, **kwargs):
        """In-place ``square`` (``torch.Tensor.square_``): ``self`` becomes ``self.square(...)``.

        Args:
            *args: ``square``'s arguments after the tensor.
            **kwargs: ``square``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("square_", lambda s: E.square(s, *args, **kwargs), *args, *kwargs.values())

    def reciprocal_(self, *args, **kwargs):
        """In-place ``reciprocal`` (``torch.Tensor.reciprocal_``): ``self`` becomes ``self.reciprocal(...)``.

        Args:
            *args: ``reciprocal``'s arguments after the tensor.
            **kwargs: ``reciprocal``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("reciprocal_", lambda s: E.reciprocal(s, *args, **kwargs), *args, *kwargs.values())

    def floor_(self, *args, **kwargs):
        """In-place ``floor`` (``torch.Tensor.floor_``): ``self`` becomes ``self.floor(...)``.

        Args:
            *args: ``floor``'s arguments after the tensor.
            **kwargs: ``floor``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("floor_", lambda s: E.floor(s, *args, **kwargs), *args, *kwargs.values())

    def ceil_(self, *args, **kwargs):
        """In-place ``ceil`` (``torch.Tensor.ceil_``): ``self`` becomes ``self.ceil(...)``.

        Args:
            *args: ``ceil``'s arguments after the tensor.
            **kwargs: ``ceil``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("ceil_", lambda s: E.ceil(s, *args, **kwargs), *args, *kwargs.values())

    def trunc_(self, *args, **kwargs):
        """In-place ``trunc`` (``torch.Tensor.trunc_``): ``self`` becomes ``self.trunc(...)``.

        Args:
            *args: ``trunc``'s arguments after the tensor.
            **kwargs: ``trunc``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("trunc_", lambda s: E.trunc(s, *args, **kwargs), *args, *kwargs.values())

    def round_(self, *args, **kwargs):
        """In-place ``round`` (``torch.Tensor.round_``): ``self`` becomes ``self.round(...)``.

        Args:
            *args: ``round``'s arguments after the tensor.
            **kwargs: ``round``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("round_", lambda s: E.round(s, *args, **kwargs), *args, *kwargs.values())

    def logical_not_(self, *args, **kwargs):
        """In-place ``logical_not`` (``torch.Tensor.logical_not_``): ``self`` becomes ``self.logical_not(...)``.

        Args:
            *args: ``logical_not``'s arguments after the tensor.
            **kwargs: ``logical_not``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("logical_not_", lambda s: E.logical_not(s, *args, **kwargs), *args, *kwargs.values())

    def masked_fill_(self, *args, **kwargs):
        """In-place ``masked_fill`` (``torch.Tensor.masked_fill_``): ``self`` becomes ``self.masked_fill(...)``.

        Args:
            *args: ``masked_fill``'s arguments after the tensor.
            **kwargs: ``masked_fill``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("masked_fill_", lambda s: E.masked_fill(s, *args, **kwargs), *args, *kwargs.values())

    def addcmul_(self, *args, **kwargs):
        """In-place ``addcmul`` (``torch.Tensor.addcmul_``): ``self`` becomes ``self.addcmul(...)``.

        Args:
            *args: ``addcmul``'s arguments after the tensor.
            **kwargs: ``addcmul``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("addcmul_", lambda s: E.addcmul(s, *args, **kwargs), *args, *kwargs.values())

    def addcdiv_(self, *args, **kwargs):
        """In-place ``addcdiv`` (``torch.Tensor.addcdiv_``): ``self`` becomes ``self.addcdiv(...)``.

        Args:
            *args: ``addcdiv``'s arguments after the tensor.
            **kwargs: ``addcdiv``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("addcdiv_", lambda s: E.addcdiv(s, *args, **kwargs), *args, *kwargs.values())

    def lerp_(self, *args, **kwargs):
        """In-place ``lerp`` (``torch.Tensor.lerp_``): ``self`` becomes ``self.lerp(...)``.

        Args:
            *args: ``lerp``'s arguments after the tensor.
            **kwargs: ``lerp``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("lerp_", lambda s: E.lerp(s, *args, **kwargs), *args, *kwargs.values())

    def lt_(self, *args, **kwargs):
        """In-place ``lt`` (``torch.Tensor.lt_``): ``self`` becomes ``self.lt(...)``.

        Args:
            *args: ``lt``'s arguments after the tensor.
            **kwargs: ``lt``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("lt_", lambda s: E.lt_(s, *args, **kwargs), *args, *kwargs.values())

    def gt_(self, *args, **kwargs):
        """In-place ``gt`` (``torch.Tensor.gt_``): ``self`` becomes ``self.gt(...)``.

        Args:
            *args: ``gt``'s arguments after the tensor.
            **kwargs: ``gt``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("gt_", lambda s: E.gt_(s, *args, **kwargs), *args, *kwargs.values())

    def le_(self, *args, **kwargs):
        """In-place ``le`` (``torch.Tensor.le_``): ``self`` becomes ``self.le(...)``.

        Args:
            *args: ``le``'s arguments after the tensor.
            **kwargs: ``le``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("le_", lambda s: E.le_(s, *args, **kwargs), *args, *kwargs.values())

    def ge_(self, *args, **kwargs):
        """In-place ``ge`` (``torch.Tensor.ge_``): ``self`` becomes ``self.ge(...)``.

        Args:
            *args: ``ge``'s arguments after the tensor.
            **kwargs: ``ge``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("ge_", lambda s: E.ge_(s, *args, **kwargs), *args, *kwargs.values())

    def eq_(self, *args, **kwargs):
        """In-place ``eq`` (``torch.Tensor.eq_``): ``self`` becomes ``self.eq(...)``.

        Args:
            *args: ``eq``'s arguments after the tensor.
            **kwargs: ``eq``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("eq_", lambda s: E.eq_(s, *args, **kwargs), *args, *kwargs.values())

    def ne_(self, *args, **kwargs):
        """In-place ``ne`` (``torch.Tensor.ne_``): ``self`` becomes ``self.ne(...)``.

        Args:
            *args: ``ne``'s arguments after the tensor.
            **kwargs: ``ne``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("ne_", lambda s: E.ne_(s, *args, **kwargs), *args, *kwargs.values())

    def cumsum_(self, *args, **kwargs):
        """In-place ``cumsum`` (``torch.Tensor.cumsum_``): ``self`` becomes ``self.cumsum(...)``.

        Args:
            *args: ``cumsum``'s arguments after the tensor.
            **kwargs: ``cumsum``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("cumsum_", lambda s: R.cumsum(s, *args, **kwargs), *args, *kwargs.values())

    def cumprod_(self, *args, **kwargs):
        """In-place ``cumprod`` (``torch.Tensor.cumprod_``): ``self`` becomes ``self.cumprod(...)``.

        Args:
            *args: ``cumprod``'s arguments after the tensor.
            **kwargs: ``cumprod``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("cumprod_", lambda s: R.cumprod(s, *args, **kwargs), *args, *kwargs.values())

    def tril_(self, *args, **kwargs):
        """In-place ``tril`` (``torch.Tensor.tril_``): ``self`` becomes ``self.tril(...)``.

        Args:
            *args: ``tril``'s arguments after the tensor.
            **kwargs: ``tril``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("tril_", lambda s: S.tril(s, *args, **kwargs), *args, *kwargs.values())

    def triu_(self, *args, **kwargs):
        """In-place ``triu`` (``torch.Tensor.triu_``): ``self`` becomes ``self.triu(...)``.

        Args:
            *args: ``triu``'s arguments after the tensor.
            **kwargs: ``triu``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("triu_", lambda s: S.triu(s, *args, **kwargs), *args, *kwargs.values())

    def clamp_min_(self, *args, **kwargs):
        """In-place ``clamp_min`` (``torch.Tensor.clamp_min_``): ``self`` becomes ``self.clamp_min(...)``.

        Args:
            *args: ``clamp_min``'s arguments after the tensor.
            **kwargs: ``clamp_min``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("clamp_min_", lambda s: X.clamp_min(s, *args, **kwargs), *args, *kwargs.values())

    def clamp_max_(self, *args, **kwargs):
        """In-place ``clamp_max`` (``torch.Tensor.clamp_max_``): ``self`` becomes ``self.clamp_max(...)``.

        Args:
            *args: ``clamp_max``'s arguments after the tensor.
            **kwargs: ``clamp_max``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("clamp_max_", lambda s: X.clamp_max(s, *args, **kwargs), *args, *kwargs.values())

    def logical_and_(self, *args, **kwargs):
        """In-place ``logical_and`` (``torch.Tensor.logical_and_``): ``self`` becomes ``self.logical_and(...)``.

        Args:
            *args: ``logical_and``'s arguments after the tensor.
            **kwargs: ``logical_and``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("logical_and_", lambda s: X.logical_and(s, *args, **kwargs), *args, *kwargs.values())

    def logical_or_(self, *args, **kwargs):
        """In-place ``logical_or`` (``torch.Tensor.logical_or_``): ``self`` becomes ``self.logical_or(...)``.

        Args:
            *args: ``logical_or``'s arguments after the tensor.
            **kwargs: ``logical_or``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("logical_or_", lambda s: X.logical_or(s, *args, **kwargs), *args, *kwargs.values())

    def logical_xor_(self, *args, **kwargs):
        """In-place ``logical_xor`` (``torch.Tensor.logical_xor_``): ``self`` becomes ``self.logical_xor(...)``.

        Args:
            *args: ``logical_xor``'s arguments after the tensor.
            **kwargs: ``logical_xor``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("logical_xor_", lambda s: X.logical_xor(s, *args, **kwargs), *args, *kwargs.values())

    def nan_to_num_(self, *args, **kwargs):
        """In-place ``nan_to_num`` (``torch.Tensor.nan_to_num_``): ``self`` becomes ``self.nan_to_num(...)``.

        Args:
            *args: ``nan_to_num``'s arguments after the tensor.
            **kwargs: ``nan_to_num``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("nan_to_num_", lambda s: X.nan_to_num(s, *args, **kwargs), *args, *kwargs.values())

    def scatter_(self, *args, **kwargs):
        """In-place ``scatter`` (``torch.Tensor.scatter_``): ``self`` becomes ``self.scatter(...)``.

        Args:
            *args: ``scatter``'s arguments after the tensor.
            **kwargs: ``scatter``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("scatter_", lambda s: SC.scatter(s, *args, **kwargs), *args, *kwargs.values())

    def scatter_add_(self, *args, **kwargs):
        """In-place ``scatter_add`` (``torch.Tensor.scatter_add_``): ``self`` becomes ``self.scatter_add(...)``.

        Args:
            *args: ``scatter_add``'s arguments after the tensor.
            **kwargs: ``scatter_add``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("scatter_add_", lambda s: SC.scatter_add(s, *args, **kwargs), *args, *kwargs.values())

    def index_add_(self, *args, **kwargs):
        """In-place ``index_add`` (``torch.Tensor.index_add_``): ``self`` becomes ``self.index_add(...)``.

        Args:
            *args: ``index_add``'s arguments after the tensor.
            **kwargs: ``index_add``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("index_add_", lambda s: SC.index_add(s, *args, **kwargs), *args, *kwargs.values())

    def acos_(self, *args, **kwargs):
        """In-place ``acos`` (``torch.Tensor.acos_``): ``self`` becomes ``self.acos(...)``.

        Args:
            *args: ``acos``'s arguments after the tensor.
            **kwargs: ``acos``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("acos_", lambda s: P.acos(s, *args, **kwargs), *args, *kwargs.values())

    def arccos_(self, *args, **kwargs):
        """In-place ``arccos`` (``torch.Tensor.arccos_``): ``self`` becomes ``self.arccos(...)``.

        Args:
            *args: ``arccos``'s arguments after the tensor.
            **kwargs: ``arccos``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("arccos_", lambda s: P.acos(s, *args, **kwargs), *args, *kwargs.values())

    def asin_(self, *args, **kwargs):
        """In-place ``asin`` (``torch.Tensor.asin_``): ``self`` becomes ``self.asin(...)``.

        Args:
            *args: ``asin``'s arguments after the tensor.
            **kwargs: ``asin``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("asin_", lambda s: P.asin(s, *args, **kwargs), *args, *kwargs.values())

    def arcsin_(self, *args, **kwargs):
        """In-place ``arcsin`` (``torch.Tensor.arcsin_``): ``self`` becomes ``self.arcsin(...)``.

        Args:
            *args: ``arcsin``'s arguments after the tensor.
            **kwargs: ``arcsin``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("arcsin_", lambda s: P.asin(s, *args, **kwargs), *args, *kwargs.values())

    def atan_(self, *args, **kwargs):
        """In-place ``atan`` (``torch.Tensor.atan_``): ``self`` becomes ``self.atan(...)``.

        Args:
            *args: ``atan``'s arguments after the tensor.
            **kwargs: ``atan``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("atan_", lambda s: P.atan(s, *args, **kwargs), *args, *kwargs.values())

    def arctan_(self, *args, **kwargs):
        """In-place ``arctan`` (``torch.Tensor.arctan_``): ``self`` becomes ``self.arctan(...)``.

        Args:
            *args: ``arctan``'s arguments after the tensor.
            **kwargs: ``arctan``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("arctan_", lambda s: P.atan(s, *args, **kwargs), *args, *kwargs.values())

    def acosh_(self, *args, **kwargs):
        """In-place ``acosh`` (``torch.Tensor.acosh_``): ``self`` becomes ``self.acosh(...)``.

        Args:
            *args: ``acosh``'s arguments after the tensor.
            **kwargs: ``acosh``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("acosh_", lambda s: P.acosh(s, *args, **kwargs), *args, *kwargs.values())

    def arccosh_(self, *args, **kwargs):
        """In-place ``arccosh`` (``torch.Tensor.arccosh_``): ``self`` becomes ``self.arccosh(...)``.

        Args:
            *args: ``arccosh``'s arguments after the tensor.
            **kwargs: ``arccosh``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("arccosh_", lambda s: P.acosh(s, *args, **kwargs), *args, *kwargs.values())

    def asinh_(self, *args, **kwargs):
        """In-place ``asinh`` (``torch.Tensor.asinh_``): ``self`` becomes ``self.asinh(...)``.

        Args:
            *args: ``asinh``'s arguments after the tensor.
            **kwargs: ``asinh``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("asinh_", lambda s: P.asinh(s, *args, **kwargs), *args, *kwargs.values())

    def arcsinh_(self, *args, **kwargs):
        """In-place ``arcsinh`` (``torch.Tensor.arcsinh_``): ``self`` becomes ``self.arcsinh(...)``.

        Args:
            *args: ``arcsinh``'s arguments after the tensor.
            **kwargs: ``arcsinh``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("arcsinh_", lambda s: P.asinh(s, *args, **kwargs), *args, *kwargs.values())

    def atanh_(self, *args, **kwargs):
        """In-place ``atanh`` (``torch.Tensor.atanh_``): ``self`` becomes ``self.atanh(...)``.

        Args:
            *args: ``atanh``'s arguments after the tensor.
            **kwargs: ``atanh``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("atanh_", lambda s: P.atanh(s, *args, **kwargs), *args, *kwargs.values())

    def arctanh_(self, *args, **kwargs):
        """In-place ``arctanh`` (``torch.Tensor.arctanh_``): ``self`` becomes ``self.arctanh(...)``.

        Args:
            *args: ``arctanh``'s arguments after the tensor.
            **kwargs: ``arctanh``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("arctanh_", lambda s: P.atanh(s, *args, **kwargs), *args, *kwargs.values())

    def tan_(self, *args, **kwargs):
        """In-place ``tan`` (``torch.Tensor.tan_``): ``self`` becomes ``self.tan(...)``.

        Args:
            *args: ``tan``'s arguments after the tensor.
            **kwargs: ``tan``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("tan_", lambda s: P.tan(s, *args, **kwargs), *args, *kwargs.values())

    def sinh_(self, *args, **kwargs):
        """In-place ``sinh`` (``torch.Tensor.sinh_``): ``self`` becomes ``self.sinh(...)``.

        Args:
            *args: ``sinh``'s arguments after the tensor.
            **kwargs: ``sinh``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("sinh_", lambda s: P.sinh(s, *args, **kwargs), *args, *kwargs.values())

    def cosh_(self, *args, **kwargs):
        """In-place ``cosh`` (``torch.Tensor.cosh_``): ``self`` becomes ``self.cosh(...)``.

        Args:
            *args: ``cosh``'s arguments after the tensor.
            **kwargs: ``cosh``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("cosh_", lambda s: P.cosh(s, *args, **kwargs), *args, *kwargs.values())

    def log2_(self, *args, **kwargs):
        """In-place ``log2`` (``torch.Tensor.log2_``): ``self`` becomes ``self.log2(...)``.

        Args:
            *args: ``log2``'s arguments after the tensor.
            **kwargs: ``log2``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("log2_", lambda s: P.log2(s, *args, **kwargs), *args, *kwargs.values())

    def log10_(self, *args, **kwargs):
        """In-place ``log10`` (``torch.Tensor.log10_``): ``self`` becomes ``self.log10(...)``.

        Args:
            *args: ``log10``'s arguments after the tensor.
            **kwargs: ``log10``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("log10_", lambda s: P.log10(s, *args, **kwargs), *args, *kwargs.values())

    def exp2_(self, *args, **kwargs):
        """In-place ``exp2`` (``torch.Tensor.exp2_``): ``self`` becomes ``self.exp2(...)``.

        Args:
            *args: ``exp2``'s arguments after the tensor.
            **kwargs: ``exp2``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("exp2_", lambda s: P.exp2(s, *args, **kwargs), *args, *kwargs.values())

    def sinc_(self, *args, **kwargs):
        """In-place ``sinc`` (``torch.Tensor.sinc_``): ``self`` becomes ``self.sinc(...)``.

        Args:
            *args: ``sinc``'s arguments after the tensor.
            **kwargs: ``sinc``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("sinc_", lambda s: P.sinc(s, *args, **kwargs), *args, *kwargs.values())

    def deg2rad_(self, *args, **kwargs):
        """In-place ``deg2rad`` (``torch.Tensor.deg2rad_``): ``self`` becomes ``self.deg2rad(...)``.

        Args:
            *args: ``deg2rad``'s arguments after the tensor.
            **kwargs: ``deg2rad``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("deg2rad_", lambda s: P.deg2rad(s, *args, **kwargs), *args, *kwargs.values())

    def rad2deg_(self, *args, **kwargs):
        """In-place ``rad2deg`` (``torch.Tensor.rad2deg_``): ``self`` becomes ``self.rad2deg(...)``.

        Args:
            *args: ``rad2deg``'s arguments after the tensor.
            **kwargs: ``rad2deg``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("rad2deg_", lambda s: P.rad2deg(s, *args, **kwargs), *args, *kwargs.values())

    def erfc_(self, *args, **kwargs):
        """In-place ``erfc`` (``torch.Tensor.erfc_``): ``self`` becomes ``self.erfc(...)``.

        Args:
            *args: ``erfc``'s arguments after the tensor.
            **kwargs: ``erfc``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("erfc_", lambda s: P.erfc(s, *args, **kwargs), *args, *kwargs.values())

    def erfinv_(self, *args, **kwargs):
        """In-place ``erfinv`` (``torch.Tensor.erfinv_``): ``self`` becomes ``self.erfinv(...)``.

        Args:
            *args: ``erfinv``'s arguments after the tensor.
            **kwargs: ``erfinv``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("erfinv_", lambda s: P.erfinv(s, *args, **kwargs), *args, *kwargs.values())

    def lgamma_(self, *args, **kwargs):
        """In-place ``lgamma`` (``torch.Tensor.lgamma_``): ``self`` becomes ``self.lgamma(...)``.

        Args:
            *args: ``lgamma``'s arguments after the tensor.
            **kwargs: ``lgamma``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("lgamma_", lambda s: P.lgamma(s, *args, **kwargs), *args, *kwargs.values())

    def digamma_(self, *args, **kwargs):
        """In-place ``digamma`` (``torch.Tensor.digamma_``): ``self`` becomes ``self.digamma(...)``.

        Args:
            *args: ``digamma``'s arguments after the tensor.
            **kwargs: ``digamma``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("digamma_", lambda s: P.digamma(s, *args, **kwargs), *args, *kwargs.values())

    def frac_(self, *args, **kwargs):
        """In-place ``frac`` (``torch.Tensor.frac_``): ``self`` becomes ``self.frac(...)``.

        Args:
            *args: ``frac``'s arguments after the tensor.
            **kwargs: ``frac``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("frac_", lambda s: P.frac(s, *args, **kwargs), *args, *kwargs.values())

    def negative_(self, *args, **kwargs):
        """In-place ``negative`` (``torch.Tensor.negative_``): ``self`` becomes ``self.negative(...)``.

        Args:
            *args: ``negative``'s arguments after the tensor.
            **kwargs: ``negative``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("negative_", lambda s: P.negative(s, *args, **kwargs), *args, *kwargs.values())

    def sgn_(self, *args, **kwargs):
        """In-place ``sgn`` (``torch.Tensor.sgn_``): ``self`` becomes ``self.sgn(...)``.

        Args:
            *args: ``sgn``'s arguments after the tensor.
            **kwargs: ``sgn``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("sgn_", lambda s: P.sgn(s, *args, **kwargs), *args, *kwargs.values())

    def fix_(self, *args, **kwargs):
        """In-place ``fix`` (``torch.Tensor.fix_``): ``self`` becomes ``self.fix(...)``.

        Args:
            *args: ``fix``'s arguments after the tensor.
            **kwargs: ``fix``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("fix_", lambda s: P.fix(s, *args, **kwargs), *args, *kwargs.values())

    def bitwise_not_(self, *args, **kwargs):
        """In-place ``bitwise_not`` (``torch.Tensor.bitwise_not_``): ``self`` becomes ``self.bitwise_not(...)``.

        Args:
            *args: ``bitwise_not``'s arguments after the tensor.
            **kwargs: ``bitwise_not``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("bitwise_not_", lambda s: P.bitwise_not(s, *args, **kwargs), *args, *kwargs.values())

    def logit_(self, *args, **kwargs):
        """In-place ``logit`` (``torch.Tensor.logit_``): ``self`` becomes ``self.logit(...)``.

        Args:
            *args: ``logit``'s arguments after the tensor.
            **kwargs: ``logit``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("logit_", lambda s: P.logit(s, *args, **kwargs), *args, *kwargs.values())

    def mvlgamma_(self, *args, **kwargs):
        """In-place ``mvlgamma`` (``torch.Tensor.mvlgamma_``): ``self`` becomes ``self.mvlgamma(...)``.

        Args:
            *args: ``mvlgamma``'s arguments after the tensor.
            **kwargs: ``mvlgamma``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("mvlgamma_", lambda s: P.mvlgamma(s, *args, **kwargs), *args, *kwargs.values())

    def atan2_(self, *args, **kwargs):
        """In-place ``atan2`` (``torch.Tensor.atan2_``): ``self`` becomes ``self.atan2(...)``.

        Args:
            *args: ``atan2``'s arguments after the tensor.
            **kwargs: ``atan2``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("atan2_", lambda s: P.atan2(s, *args, **kwargs), *args, *kwargs.values())

    def arctan2_(self, *args, **kwargs):
        """In-place ``arctan2`` (``torch.Tensor.arctan2_``): ``self`` becomes ``self.arctan2(...)``.

        Args:
            *args: ``arctan2``'s arguments after the tensor.
            **kwargs: ``arctan2``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("arctan2_", lambda s: P.atan2(s, *args, **kwargs), *args, *kwargs.values())

    def hypot_(self, *args, **kwargs):
        """In-place ``hypot`` (``torch.Tensor.hypot_``): ``self`` becomes ``self.hypot(...)``.

        Args:
            *args: ``hypot``'s arguments after the tensor.
            **kwargs: ``hypot``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("hypot_", lambda s: P.hypot(s, *args, **kwargs), *args, *kwargs.values())

    def fmod_(self, *args, **kwargs):
        """In-place ``fmod`` (``torch.Tensor.fmod_``): ``self`` becomes ``self.fmod(...)``.

        Args:
            *args: ``fmod``'s arguments after the tensor.
            **kwargs: ``fmod``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("fmod_", lambda s: P.fmod(s, *args, **kwargs), *args, *kwargs.values())

    def remainder_(self, *args, **kwargs):
        """In-place ``remainder`` (``torch.Tensor.remainder_``): ``self`` becomes ``self.remainder(...)``.

        Args:
            *args: ``remainder``'s arguments after the tensor.
            **kwargs: ``remainder``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("remainder_", lambda s: P.remainder(s, *args, **kwargs), *args, *kwargs.values())

    def floor_divide_(self, *args, **kwargs):
        """In-place ``floor_divide`` (``torch.Tensor.floor_divide_``): ``self`` becomes ``self.floor_divide(...)``.

        Args:
            *args: ``floor_divide``'s arguments after the tensor.
            **kwargs: ``floor_divide``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("floor_divide_", lambda s: P.floor_divide(s, *args, **kwargs), *args, *kwargs.values())

    def copysign_(self, *args, **kwargs):
        """In-place ``copysign`` (``torch.Tensor.copysign_``): ``self`` becomes ``self.copysign(...)``.

        Args:
            *args: ``copysign``'s arguments after the tensor.
            **kwargs: ``copysign``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("copysign_", lambda s: P.copysign(s, *args, **kwargs), *args, *kwargs.values())

    def xlogy_(self, *args, **kwargs):
        """In-place ``xlogy`` (``torch.Tensor.xlogy_``): ``self`` becomes ``self.xlogy(...)``.

        Args:
            *args: ``xlogy``'s arguments after the tensor.
            **kwargs: ``xlogy``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("xlogy_", lambda s: P.xlogy(s, *args, **kwargs), *args, *kwargs.values())

    def float_power_(self, *args, **kwargs):
        """In-place ``float_power`` (``torch.Tensor.float_power_``): ``self`` becomes ``self.float_power(...)``.

        Args:
            *args: ``float_power``'s arguments after the tensor.
            **kwargs: ``float_power``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("float_power_", lambda s: P.float_power(s, *args, **kwargs), *args, *kwargs.values())

    def ldexp_(self, *args, **kwargs):
        """In-place ``ldexp`` (``torch.Tensor.ldexp_``): ``self`` becomes ``self.ldexp(...)``.

        Args:
            *args: ``ldexp``'s arguments after the tensor.
            **kwargs: ``ldexp``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("ldexp_", lambda s: P.ldexp(s, *args, **kwargs), *args, *kwargs.values())

    def nextafter_(self, *args, **kwargs):
        """In-place ``nextafter`` (``torch.Tensor.nextafter_``): ``self`` becomes ``self.nextafter(...)``.

        Args:
            *args: ``nextafter``'s arguments after the tensor.
            **kwargs: ``nextafter``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("nextafter_", lambda s: P.nextafter(s, *args, **kwargs), *args, *kwargs.values())

    def heaviside_(self, *args, **kwargs):
        """In-place ``heaviside`` (``torch.Tensor.heaviside_``): ``self`` becomes ``self.heaviside(...)``.

        Args:
            *args: ``heaviside``'s arguments after the tensor.
            **kwargs: ``heaviside``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("heaviside_", lambda s: P.heaviside(s, *args, **kwargs), *args, *kwargs.values())

    def gcd_(self, *args, **kwargs):
        """In-place ``gcd`` (``torch.Tensor.gcd_``): ``self`` becomes ``self.gcd(...)``.

        Args:
            *args: ``gcd``'s arguments after the tensor.
            **kwargs: ``gcd``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("gcd_", lambda s: P.gcd(s, *args, **kwargs), *args, *kwargs.values())

    def lcm_(self, *args, **kwargs):
        """In-place ``lcm`` (``torch.Tensor.lcm_``): ``self`` becomes ``self.lcm(...)``.

        Args:
            *args: ``lcm``'s arguments after the tensor.
            **kwargs: ``lcm``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("lcm_", lambda s: P.lcm(s, *args, **kwargs), *args, *kwargs.values())

    def bitwise_and_(self, *args, **kwargs):
        """In-place ``bitwise_and`` (``torch.Tensor.bitwise_and_``): ``self`` becomes ``self.bitwise_and(...)``.

        Args:
            *args: ``bitwise_and``'s arguments after the tensor.
            **kwargs: ``bitwise_and``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("bitwise_and_", lambda s: P.bitwise_and(s, *args, **kwargs), *args, *kwargs.values())

    def bitwise_or_(self, *args, **kwargs):
        """In-place ``bitwise_or`` (``torch.Tensor.bitwise_or_``): ``self`` becomes ``self.bitwise_or(...)``.

        Args:
            *args: ``bitwise_or``'s arguments after the tensor.
            **kwargs: ``bitwise_or``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("bitwise_or_", lambda s: P.bitwise_or(s, *args, **kwargs), *args, *kwargs.values())

    def bitwise_xor_(self, *args, **kwargs):
        """In-place ``bitwise_xor`` (``torch.Tensor.bitwise_xor_``): ``self`` becomes ``self.bitwise_xor(...)``.

        Args:
            *args: ``bitwise_xor``'s arguments after the tensor.
            **kwargs: ``bitwise_xor``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("bitwise_xor_", lambda s: P.bitwise_xor(s, *args, **kwargs), *args, *kwargs.values())

    def bitwise_left_shift_(self, *args, **kwargs):
        """In-place ``bitwise_left_shift`` (``torch.Tensor.bitwise_left_shift_``): ``self`` becomes ``self.bitwise_left_shift(...)``.

        Args:
            *args: ``bitwise_left_shift``'s arguments after the tensor.
            **kwargs: ``bitwise_left_shift``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("bitwise_left_shift_", lambda s: P.bitwise_left_shift(s, *args, **kwargs), *args, *kwargs.values())

    def bitwise_right_shift_(self, *args, **kwargs):
        """In-place ``bitwise_right_shift`` (``torch.Tensor.bitwise_right_shift_``): ``self`` becomes ``self.bitwise_right_shift(...)``.

        Args:
            *args: ``bitwise_right_shift``'s arguments after the tensor.
            **kwargs: ``bitwise_right_shift``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("bitwise_right_shift_", lambda s: P.bitwise_right_shift(s, *args, **kwargs), *args, *kwargs.values())

    def greater_(self, *args, **kwargs):
        """In-place ``greater`` (``torch.Tensor.greater_``): ``self`` becomes ``self.greater(...)``.

        Args:
            *args: ``greater``'s arguments after the tensor.
            **kwargs: ``greater``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("greater_", lambda s: E.gt_(s, *args, **kwargs), *args, *kwargs.values())

    def greater_equal_(self, *args, **kwargs):
        """In-place ``greater_equal`` (``torch.Tensor.greater_equal_``): ``self`` becomes ``self.greater_equal(...)``.

        Args:
            *args: ``greater_equal``'s arguments after the tensor.
            **kwargs: ``greater_equal``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("greater_equal_", lambda s: E.ge_(s, *args, **kwargs), *args, *kwargs.values())

    def less_(self, *args, **kwargs):
        """In-place ``less`` (``torch.Tensor.less_``): ``self`` becomes ``self.less(...)``.

        Args:
            *args: ``less``'s arguments after the tensor.
            **kwargs: ``less``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("less_", lambda s: E.lt_(s, *args, **kwargs), *args, *kwargs.values())

    def less_equal_(self, *args, **kwargs):
        """In-place ``less_equal`` (``torch.Tensor.less_equal_``): ``self`` becomes ``self.less_equal(...)``.

        Args:
            *args: ``less_equal``'s arguments after the tensor.
            **kwargs: ``less_equal``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("less_equal_", lambda s: E.le_(s, *args, **kwargs), *args, *kwargs.values())

    def not_equal_(self, *args, **kwargs):
        """In-place ``not_equal`` (``torch.Tensor.not_equal_``): ``self`` becomes ``self.not_equal(...)``.

        Args:
            *args: ``not_equal``'s arguments after the tensor.
            **kwargs: ``not_equal``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("not_equal_", lambda s: E.ne_(s, *args, **kwargs), *args, *kwargs.values())

    def conj_physical_(self, *args, **kwargs):
        """In-place ``conj_physical`` (``torch.Tensor.conj_physical_``): ``self`` becomes ``self.conj_physical(...)``.

        Args:
            *args: ``conj_physical``'s arguments after the tensor.
            **kwargs: ``conj_physical``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("conj_physical_", lambda s: C.conj(s, *args, **kwargs), *args, *kwargs.values())

    def index_copy_(self, *args, **kwargs):
        """In-place ``index_copy`` (``torch.Tensor.index_copy_``): ``self`` becomes ``self.index_copy(...)``.

        Args:
            *args: ``index_copy``'s arguments after the tensor.
            **kwargs: ``index_copy``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("index_copy_", lambda s: IX.index_copy(s, *args, **kwargs), *args, *kwargs.values())

    def index_fill_(self, *args, **kwargs):
        """In-place ``index_fill`` (``torch.Tensor.index_fill_``): ``self`` becomes ``self.index_fill(...)``.

        Args:
            *args: ``index_fill``'s arguments after the tensor.
            **kwargs: ``index_fill``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("index_fill_", lambda s: IX.index_fill(s, *args, **kwargs), *args, *kwargs.values())

    def index_put_(self, *args, **kwargs):
        """In-place ``index_put`` (``torch.Tensor.index_put_``): ``self`` becomes ``self.index_put(...)``.

        Args:
            *args: ``index_put``'s arguments after the tensor.
            **kwargs: ``index_put``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("index_put_", lambda s: IX.index_put(s, *args, **kwargs), *args, *kwargs.values())

    def masked_scatter_(self, *args, **kwargs):
        """In-place ``masked_scatter`` (``torch.Tensor.masked_scatter_``): ``self`` becomes ``self.masked_scatter(...)``.

        Args:
            *args: ``masked_scatter``'s arguments after the tensor.
            **kwargs: ``masked_scatter``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("masked_scatter_", lambda s: IX.masked_scatter(s, *args, **kwargs), *args, *kwargs.values())

    def put_(self, *args, **kwargs):
        """In-place ``put`` (``torch.Tensor.put_``): ``self`` becomes ``self.put(...)``.

        Args:
            *args: ``put``'s arguments after the tensor.
            **kwargs: ``put``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("put_", lambda s: IX.put(s, *args, **kwargs), *args, *kwargs.values())

    def scatter_reduce_(self, *args, **kwargs):
        """In-place ``scatter_reduce`` (``torch.Tensor.scatter_reduce_``): ``self`` becomes ``self.scatter_reduce(...)``.

        Args:
            *args: ``scatter_reduce``'s arguments after the tensor.
            **kwargs: ``scatter_reduce``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("scatter_reduce_", lambda s: IX.scatter_reduce(s, *args, **kwargs), *args, *kwargs.values())

    def index_reduce_(self, *args, **kwargs):
        """In-place ``index_reduce`` (``torch.Tensor.index_reduce_``): ``self`` becomes ``self.index_reduce(...)``.

        Args:
            *args: ``index_reduce``'s arguments after the tensor.
            **kwargs: ``index_reduce``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("index_reduce_", lambda s: IX.index_reduce(s, *args, **kwargs), *args, *kwargs.values())

    def renorm_(self, *args, **kwargs):
        """In-place ``renorm`` (``torch.Tensor.renorm_``): ``self`` becomes ``self.renorm(...)``.

        Args:
            *args: ``renorm``'s arguments after the tensor.
            **kwargs: ``renorm``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("renorm_", lambda s: ST.renorm(s, *args, **kwargs), *args, *kwargs.values())

    def addmm_(self, *args, **kwargs):
        """In-place ``addmm`` (``torch.Tensor.addmm_``): ``self`` becomes ``self.addmm(...)``.

        Args:
            *args: ``addmm``'s arguments after the tensor.
            **kwargs: ``addmm``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("addmm_", lambda s: BL.addmm(s, *args, **kwargs), *args, *kwargs.values())

    def addmv_(self, *args, **kwargs):
        """In-place ``addmv`` (``torch.Tensor.addmv_``): ``self`` becomes ``self.addmv(...)``.

        Args:
            *args: ``addmv``'s arguments after the tensor.
            **kwargs: ``addmv``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("addmv_", lambda s: BL.addmv(s, *args, **kwargs), *args, *kwargs.values())

    def addr_(self, *args, **kwargs):
        """In-place ``addr`` (``torch.Tensor.addr_``): ``self`` becomes ``self.addr(...)``.

        Args:
            *args: ``addr``'s arguments after the tensor.
            **kwargs: ``addr``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("addr_", lambda s: BL.addr(s, *args, **kwargs), *args, *kwargs.values())

    def baddbmm_(self, *args, **kwargs):
        """In-place ``baddbmm`` (``torch.Tensor.baddbmm_``): ``self`` becomes ``self.baddbmm(...)``.

        Args:
            *args: ``baddbmm``'s arguments after the tensor.
            **kwargs: ``baddbmm``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("baddbmm_", lambda s: BL.baddbmm(s, *args, **kwargs), *args, *kwargs.values())

    def addbmm_(self, *args, **kwargs):
        """In-place ``addbmm`` (``torch.Tensor.addbmm_``): ``self`` becomes ``self.addbmm(...)``.

        Args:
            *args: ``addbmm``'s arguments after the tensor.
            **kwargs: ``addbmm``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("addbmm_", lambda s: BL.addbmm(s, *args, **kwargs), *args, *kwargs.values())
