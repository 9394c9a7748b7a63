"""The op table: one entry per public op, from which ``tb.<name>`` and ``Tensor.<name>`` are made.

Each entry is ``name: (op, where)``; ``where`` holds ``f`` when the op is a ``tb.*`` function,
``m`` when it is a Tensor method (the op called with the tensor as its first argument) and ``i``
when ``Tensor.<name>_`` is its in-place form. ``python tensorbrain/_ops/generate.py`` writes the
definitions from it, committed: ``generated.py`` (``TableMethods``, a base class of ``Tensor``)
and ``functions.py`` (the ``tb.*`` functions); a test fails while they are stale. Methods whose
form differs from the op's (``Tensor.where(cond, other)``, ``view_as``) are written out in
``tensorbrain/_tensor_adapters.py``.
"""
from __future__ import annotations

from . import blas as BL
from . import calculus as CA
from . import combine as CB
from . import joining as JN
from . import complex as C
from . import convert as CV
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

OPS = {
    # ***** elementwise *****
    "add": (E.add, "fm"), "sub": (E.sub, "fm"), "mul": (E.mul, "fm"), "div": (E.div, "fm"),
    "pow": (E.pow, "fm"), "neg": (E.neg, "fm"),
    "multiply": (E.mul, "fmi"), "divide": (E.div, "fmi"), "subtract": (E.sub, "fmi"),
    "true_divide": (E.div, "fmi"),
    "maximum": (E.maximum, "fm"), "minimum": (E.minimum, "fm"), "where": (E.where, "f"),
    "exp": (E.exp, "fm"), "log": (E.log, "fmi"), "sqrt": (E.sqrt, "fm"), "rsqrt": (E.rsqrt, "fmi"),
    "abs": (E.abs, "fmi"), "absolute": (E.abs, "fmi"), "sign": (E.sign, "fmi"), "sin": (E.sin, "fmi"), "cos": (E.cos, "fmi"),
    "clamp": (E.clamp, "fm"), "clip": (E.clamp, "fmi"),
    "relu": (E.relu, "fm"), "sigmoid": (E.sigmoid, "fmi"), "tanh": (E.tanh, "fmi"),
    "gelu": (E.gelu, "fm"), "silu": (E.silu, "fm"), "log1p": (E.log1p, "fmi"),
    "expm1": (E.expm1, "fmi"), "erf": (E.erf, "fmi"), "square": (E.square, "fmi"),
    "reciprocal": (E.reciprocal, "fmi"), "floor": (E.floor, "fmi"), "ceil": (E.ceil, "fmi"),
    "trunc": (E.trunc, "fmi"), "round": (E.round, "fmi"), "isnan": (E.isnan, "fm"),
    "isinf": (E.isinf, "fm"), "isfinite": (E.isfinite, "fm"),
    "logical_not": (E.logical_not, "fmi"), "masked_fill": (E.masked_fill, "fmi"),
    "addcmul": (E.addcmul, "fmi"), "addcdiv": (E.addcdiv, "fmi"), "lerp": (E.lerp, "fmi"),
    "lt": (E.lt_, "fmi"), "gt": (E.gt_, "fmi"), "le": (E.le_, "fmi"), "ge": (E.ge_, "fmi"),
    "eq": (E.eq_, "fmi"), "ne": (E.ne_, "fmi"),
    # floor_divide, remainder and bitwise_*: pointwise.py's, below (the operators //, %, &, |,
    # ^, ~ are these functions: tensor.py)
    # ***** reductions *****
    "sum": (R.sum, "fm"), "mean": (R.mean, "fm"), "max": (R.max, "fm"), "min": (R.min, "fm"),
    "amax": (R.amax, "fm"), "argmax": (R.argmax, "fm"), "argmin": (R.argmin, "fm"),
    "var": (R.var, "fm"), "std": (R.std, "fm"), "logsumexp": (R.logsumexp, "fm"),
    "prod": (R.prod, "fm"), "cumsum": (R.cumsum, "fmi"), "cumprod": (R.cumprod, "fmi"), "all": (R.all, "fm"),
    "any": (R.any, "fm"), "norm": (R.norm, "fm"),
    "softmax": (_softmax.softmax, "f"), "log_softmax": (_softmax.log_softmax, "f"),
    # ***** shape, indexing, linear algebra *****
    "reshape": (S.reshape, "fm"), "view": (S.view, "m"), "flatten": (S.flatten, "fm"),
    "unflatten": (S.unflatten, "m"), "permute": (S.permute, "fm"),
    "transpose": (S.transpose, "fm"), "swapaxes": (S.transpose, "fm"),
    "swapdims": (S.transpose, "fm"), "t": (S.t, "fm"), "squeeze": (S.squeeze, "fm"),
    "unsqueeze": (S.unsqueeze, "fm"), "expand": (S.expand, "m"), "expand_as": (S.expand_as, "m"),
    "contiguous": (S.contiguous, "m"), "clone": (S.clone, "fm"),
    "cat": (S.cat, "f"), "concat": (S.cat, "f"), "stack": (S.stack, "f"),
    "split": (S.split, "fm"), "chunk": (S.chunk, "fm"), "narrow": (S.narrow, "fm"),
    "matmul": (S.matmul, "fm"), "mm": (S.matmul, "fm"), "bmm": (S.matmul, "fm"),
    "dot": (S.dot, "fm"), "outer": (S.outer, "fm"),
    "gather": (S.gather, "fm"), "index_select": (S.index_select, "fm"),
    "tril": (S.tril, "fmi"), "triu": (S.triu, "fmi"), "repeat": (S.repeat, "m"),
    "flip": (S.flip, "fm"), "sort": (S.sort, "fm"), "argsort": (S.argsort, "fm"),
    "topk": (S.topk, "fm"), "einsum": (_einsum.einsum, "f"),
    # ***** composites (extra.py) *****
    "amin": (X.amin, "fm"), "clamp_min": (X.clamp_min, "fmi"), "clamp_max": (X.clamp_max, "fmi"),
    "logical_and": (X.logical_and, "fmi"), "logical_or": (X.logical_or, "fmi"),
    "logical_xor": (X.logical_xor, "fmi"), "isclose": (X.isclose, "fm"), "unbind": (X.unbind, "fm"),
    "nan_to_num": (X.nan_to_num, "fmi"), "allclose": (X.allclose, "fm"),
    "equal": (X.equal, "fm"),
    # ***** writing at indices (scatter.py) *****
    "scatter": (SC.scatter, "fmi"), "scatter_add": (SC.scatter_add, "fmi"),
    "index_add": (SC.index_add, "fmi"),
    # ***** picking and counting (select.py) *****
    "nonzero": (SL.nonzero, "fm"), "masked_select": (SL.masked_select, "fm"),
    "unique": (SL.unique, "fm"), "bincount": (SL.bincount, "fm"),
    "count_nonzero": (SL.count_nonzero, "fm"), "take_along_dim": (SL.take_along_dim, "fm"),
    "median": (SL.median, "fm"), "kthvalue": (SL.kthvalue, "fm"),
    # ***** moving and repeating (rearrange.py) *****
    "roll": (RA.roll, "fm"), "diag": (RA.diag, "fm"), "trace": (RA.trace, "fm"),
    "repeat_interleave": (RA.repeat_interleave, "fm"), "meshgrid": (RA.meshgrid, "f"),
    "kron": (RA.kron, "fm"),
    # ***** the long tail of elementwise math (pointwise.py) *****
    "acos": (P.acos, "fmi"), "arccos": (P.acos, "fmi"), "asin": (P.asin, "fmi"),
    "arcsin": (P.asin, "fmi"), "atan": (P.atan, "fmi"), "arctan": (P.atan, "fmi"),
    "acosh": (P.acosh, "fmi"), "arccosh": (P.acosh, "fmi"), "asinh": (P.asinh, "fmi"),
    "arcsinh": (P.asinh, "fmi"), "atanh": (P.atanh, "fmi"), "arctanh": (P.atanh, "fmi"),
    "tan": (P.tan, "fmi"), "sinh": (P.sinh, "fmi"), "cosh": (P.cosh, "fmi"),
    "log2": (P.log2, "fmi"), "log10": (P.log10, "fmi"), "exp2": (P.exp2, "fmi"),
    "sinc": (P.sinc, "fmi"), "deg2rad": (P.deg2rad, "fmi"), "rad2deg": (P.rad2deg, "fmi"),
    "erfc": (P.erfc, "fmi"), "erfinv": (P.erfinv, "fmi"), "lgamma": (P.lgamma, "fmi"),
    "digamma": (P.digamma, "fmi"), "frac": (P.frac, "fmi"), "negative": (P.negative, "fmi"),
    "positive": (P.positive, "fm"), "sgn": (P.sgn, "fmi"), "fix": (P.fix, "fmi"),
    "signbit": (P.signbit, "fm"), "isposinf": (P.isposinf, "fm"), "isneginf": (P.isneginf, "fm"),
    "isreal": (P.isreal, "fm"), "bitwise_not": (P.bitwise_not, "fmi"),
    "logit": (P.logit, "fmi"), "hardshrink": (P.hardshrink, "fm"),
    "mvlgamma": (P.mvlgamma, "fmi"),
    "atan2": (P.atan2, "fmi"), "arctan2": (P.atan2, "fmi"), "hypot": (P.hypot, "fmi"),
    "fmod": (P.fmod, "fmi"), "remainder": (P.remainder, "fmi"),
    "floor_divide": (P.floor_divide, "fmi"), "copysign": (P.copysign, "fmi"),
    "xlogy": (P.xlogy, "fmi"), "logaddexp": (P.logaddexp, "fm"),
    "logaddexp2": (P.logaddexp2, "fm"), "float_power": (P.float_power, "fmi"),
    "fmax": (P.fmax, "fm"), "fmin": (P.fmin, "fm"), "ldexp": (P.ldexp, "fmi"),
    "nextafter": (P.nextafter, "fmi"), "heaviside": (P.heaviside, "fmi"), "gcd": (P.gcd, "fmi"),
    "lcm": (P.lcm, "fmi"), "bitwise_and": (P.bitwise_and, "fmi"),
    "bitwise_or": (P.bitwise_or, "fmi"), "bitwise_xor": (P.bitwise_xor, "fmi"),
    "bitwise_left_shift": (P.bitwise_left_shift, "fmi"),
    "bitwise_right_shift": (P.bitwise_right_shift, "fmi"),
    "greater": (E.gt_, "fmi"), "greater_equal": (E.ge_, "fmi"), "less": (E.lt_, "fmi"),
    "less_equal": (E.le_, "fmi"), "not_equal": (E.ne_, "fmi"),
    # ***** complex numbers (complex.py) *****
    "view_as_real": (C.view_as_real, "f"), "view_as_complex": (C.view_as_complex, "f"),
    "polar": (C.polar, "f"), "complex": (C.complex, "f"), "real": (C.real, "f"),
    "imag": (C.imag, "f"), "conj": (C.conj, "fm"), "conj_physical": (C.conj, "fmi"),
    "resolve_conj": (C.resolve, "fm"), "resolve_neg": (C.resolve, "fm"),
    "angle": (C.angle, "fm"), "adjoint": (C.adjoint, "fm"),
    "is_complex": (C.is_complex, "f"),
    # ***** dtype conversions by name (convert.py) *****
    "byte": (CV.byte, "m"), "char": (CV.char, "m"), "short": (CV.short, "m"),
    "cfloat": (CV.cfloat, "m"), "cdouble": (CV.cdouble, "m"),
    # ***** reshaping, joining, splitting (combine.py, joining.py) *****
    "movedim": (CB.movedim, "fm"), "moveaxis": (CB.movedim, "fm"), "ravel": (CB.ravel, "fm"),
    "tile": (CB.tile, "fm"), "broadcast_to": (CB.broadcast_to, "fm"), "select": (CB.select, "fm"),
    "diagonal": (CB.diagonal, "fm"), "unfold": (CB.unfold, "m"),
    "as_strided": (CB.as_strided, "fm"), "atleast_1d": (JN.atleast_1d, "f"),
    "atleast_2d": (JN.atleast_2d, "f"), "atleast_3d": (JN.atleast_3d, "f"),
    "vstack": (JN.vstack, "f"), "row_stack": (JN.vstack, "f"), "hstack": (JN.hstack, "f"),
    "dstack": (JN.dstack, "f"), "column_stack": (JN.column_stack, "f"),
    "tensor_split": (JN.tensor_split, "fm"), "hsplit": (JN.hsplit, "fm"),
    "vsplit": (JN.vsplit, "fm"), "dsplit": (JN.dsplit, "fm"),
    "split_with_sizes": (JN.split_with_sizes, "fm"), "fliplr": (CB.fliplr, "fm"),
    "unsafe_chunk": (S.chunk, "fm"), "unsafe_split": (S.split, "fm"),
    "unsafe_split_with_sizes": (JN.split_with_sizes, "fm"), "narrow_copy": (CB.narrow_copy, "fm"),
    "flipud": (CB.flipud, "fm"), "rot90": (CB.rot90, "fm"),
    "broadcast_tensors": (CB.broadcast_tensors, "f"), "block_diag": (CB.block_diag, "f"),
    "cartesian_prod": (CB.cartesian_prod, "f"), "combinations": (CB.combinations, "f"),
    "diag_embed": (CB.diag_embed, "fm"), "diagflat": (CB.diagflat, "fm"),
    # ***** reading and writing at indices (indexing.py, index_queries.py) *****
    "index_copy": (IX.index_copy, "fmi"), "index_fill": (IX.index_fill, "fmi"),
    "index_put": (IX.index_put, "fmi"), "masked_scatter": (IX.masked_scatter, "fmi"),
    "take": (IX.take, "fm"), "put": (IX.put, "fmi"),
    "select_scatter": (IX.select_scatter, "fm"), "slice_scatter": (IX.slice_scatter, "fm"),
    "diagonal_scatter": (IX.diagonal_scatter, "fm"),
    "scatter_reduce": (IX.scatter_reduce, "fmi"), "searchsorted": (IQ.searchsorted, "f"),
    "bucketize": (IQ.bucketize, "f"), "isin": (IQ.isin, "f"), "argwhere": (IQ.argwhere, "fm"),
    "unique_consecutive": (IQ.unique_consecutive, "fm"),
    "tril_indices": (IQ.tril_indices, "f"), "triu_indices": (IQ.triu_indices, "f"),
    "nonzero_static": (IQ.nonzero_static, "fm"), "index_reduce": (IX.index_reduce, "fmi"),
    # ***** statistics (stats.py, quantiles.py) *****
    "mode": (ST.mode, "fm"), "cummax": (ST.cummax, "fm"), "cummin": (ST.cummin, "fm"),
    "logcumsumexp": (ST.logcumsumexp, "fm"), "nansum": (ST.nansum, "fm"),
    "nanmean": (ST.nanmean, "fm"), "nanmedian": (ST.nanmedian, "fm"),
    "quantile": (QT.quantile, "fm"), "nanquantile": (QT.nanquantile, "fm"),
    "std_mean": (ST.std_mean, "f"), "var_mean": (ST.var_mean, "f"),
    "aminmax": (ST.aminmax, "fm"), "histc": (QT.histc, "fm"), "histogram": (QT.histogram, "fm"),
    "dist": (ST.dist, "fm"), "diff": (ST.diff, "fm"), "cov": (ST.cov, "fm"),
    "corrcoef": (ST.corrcoef, "fm"), "renorm": (ST.renorm, "fmi"),
    "trapezoid": (ST.trapezoid, "f"), "trapz": (ST.trapezoid, "f"), "msort": (ST.msort, "fm"),
    "sum_to_size": (ST.sum_to_size, "m"),
    # ***** matrix products (blas.py) *****
    "addmm": (BL.addmm, "fmi"), "addmv": (BL.addmv, "fmi"), "addr": (BL.addr, "fmi"),
    "baddbmm": (BL.baddbmm, "fmi"), "addbmm": (BL.addbmm, "fmi"), "mv": (BL.mv, "fm"),
    "inner": (BL.inner, "fm"), "vdot": (BL.vdot, "fm"), "ger": (BL.ger, "fm"),
    "cross": (BL.cross, "fm"), "tensordot": (BL.tensordot, "f"),
    "chain_matmul": (BL.chain_matmul, "f"), "cdist": (BL.cdist, "f"),
    # ***** linear algebra in the torch namespace (tensorbrain/linalg.py, _linalg_legacy.py) *****
    "det": (LA.det, "fm"), "inverse": (LA.inv, "fm"), "slogdet": (LA.slogdet, "fm"),
    "logdet": (LL.logdet, "fm"), "pinverse": (LL.pinverse, "fm"),
    "matrix_power": (LA.matrix_power, "fm"), "matrix_exp": (LA.matrix_exp, "fm"),
    "cholesky": (LL.legacy_cholesky, "fm"), "qr": (LL.legacy_qr, "fm"),
    "svd": (LL.legacy_svd, "fm"), "cholesky_solve": (LL.cholesky_solve, "fm"),
    "cholesky_inverse": (LL.cholesky_inverse, "fm"),
    # ***** signal processing (tensorbrain/_signal.py) *****
    "stft": (SG.stft, "fm"), "hann_window": (SG.hann_window, "f"),
    "hamming_window": (SG.hamming_window, "f"), "blackman_window": (SG.blackman_window, "f"),
    "bartlett_window": (SG.bartlett_window, "f"), "kaiser_window": (SG.kaiser_window, "f"),
    # ***** long tail of the scanned programs (calculus.py, nn_extra.py) *****
    "gradient": (CA.gradient, "f"), "fill": (CA.fill, "f"), "expand_copy": (CA.expand_copy, "f"),
    "is_nonzero": (CA.is_nonzero, "fm"), "prelu": (NX.prelu, "fm"),
}


def _document():
    """Sets the docstrings of docs_math.py and docs_shape.py on the ops that have none in their
    own module (a factory-made op, or one documented here to keep its module short)."""
    from .docs_math import DOCS as math_docs
    from .docs_shape import DOCS as shape_docs
    for name, doc in {**math_docs, **shape_docs}.items():
        op = OPS[name][0]
        if not op.__doc__:
            op.__doc__ = doc


_document()
