"""The op table's Tensor methods, as ordinary definitions.

GENERATED from ``tensorbrain/_ops/table.py`` by ``python tensorbrain/_ops/generate.py``: do not
edit by hand. Add or change an entry of ``OPS`` in ``table.py``, then rerun the generator;
``tests/test_tensor.py::test_generated_table_methods_are_current`` fails while this file is stale.

``TableMethods`` is a base class of ``tensorbrain.tensor.Tensor``: a table method is the op
itself (the tensor is its first argument), an in-place form runs the op through
``TensorBase._inplace``.
"""
from __future__ import annotations

from . import elementwise as E
from . import extra as X
from . import rearrange as RA
from . import reduce as R
from . import scatter as SC
from . import select as SL
from . import shape as S


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

    # ***** in-place forms *****
    def log_(self, *args, **kwargs):
        """In-place ``log`` (``torch.Tensor.log_``): ``self`` becomes ``self.log(...)``.

        Args:
            *args: ``log``'s arguments after the tensor.
            **kwargs: ``log``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("log_", lambda s: E.log(s, *args, **kwargs), *args, *kwargs.values())

    def abs_(self, *args, **kwargs):
        """In-place ``abs`` (``torch.Tensor.abs_``): ``self`` becomes ``self.abs(...)``.

        Args:
            *args: ``abs``'s arguments after the tensor.
            **kwargs: ``abs``'s keyword arguments.

        Returns:
            Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
        """
        return self._inplace("abs_", lambda s: E.abs(s, *args, **kwargs), *args, *kwargs.values())

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
