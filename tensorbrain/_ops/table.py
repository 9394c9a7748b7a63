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

from . import einsum as _einsum
from . import elementwise as E
from . import extra as X
from . import rearrange as RA
from . import reduce as R
from . import scatter as SC
from . import select as SL
from . import shape as S
from . import softmax as _softmax

OPS = {
    # ***** elementwise *****
    "add": (E.add, "fm"), "sub": (E.sub, "fm"), "mul": (E.mul, "fm"), "div": (E.div, "fm"),
    "pow": (E.pow, "fm"), "neg": (E.neg, "fm"),
    "multiply": (E.mul, "fm"), "divide": (E.div, "fm"), "subtract": (E.sub, "fm"),
    "true_divide": (E.div, "fm"),
    "maximum": (E.maximum, "fm"), "minimum": (E.minimum, "fm"), "where": (E.where, "f"),
    "exp": (E.exp, "fm"), "log": (E.log, "fmi"), "sqrt": (E.sqrt, "fm"), "rsqrt": (E.rsqrt, "fm"),
    "abs": (E.abs, "fmi"), "sign": (E.sign, "fm"), "sin": (E.sin, "fm"), "cos": (E.cos, "fm"),
    "clamp": (E.clamp, "fm"), "clip": (E.clamp, "fm"),
    "relu": (E.relu, "fm"), "sigmoid": (E.sigmoid, "fmi"), "tanh": (E.tanh, "fmi"),
    "gelu": (E.gelu, "fm"), "silu": (E.silu, "fm"), "log1p": (E.log1p, "fm"),
    "expm1": (E.expm1, "fm"), "erf": (E.erf, "fm"), "square": (E.square, "fm"),
    "reciprocal": (E.reciprocal, "fm"), "floor": (E.floor, "fmi"), "ceil": (E.ceil, "fmi"),
    "trunc": (E.trunc, "fm"), "round": (E.round, "fm"), "isnan": (E.isnan, "fm"),
    "isinf": (E.isinf, "fm"), "isfinite": (E.isfinite, "fm"),
    "logical_not": (E.logical_not, "fm"), "masked_fill": (E.masked_fill, "fmi"),
    "addcmul": (E.addcmul, "fmi"), "addcdiv": (E.addcdiv, "fmi"), "lerp": (E.lerp, "fmi"),
    "lt": (E.lt_, "fm"), "gt": (E.gt_, "fm"), "le": (E.le_, "fm"), "ge": (E.ge_, "fm"),
    "eq": (E.eq_, "fm"), "ne": (E.ne_, "fm"),
    "floor_divide": (E.floor_divide, "fm"), "remainder": (E.remainder, "fm"),
    "bitwise_and": (E.bitwise_and, "fm"), "bitwise_or": (E.bitwise_or, "fm"),
    "bitwise_xor": (E.bitwise_xor, "fm"), "bitwise_not": (E.bitwise_not, "fm"),
    # ***** reductions *****
    "sum": (R.sum, "fm"), "mean": (R.mean, "fm"), "max": (R.max, "fm"), "min": (R.min, "fm"),
    "amax": (R.amax, "fm"), "argmax": (R.argmax, "fm"), "argmin": (R.argmin, "fm"),
    "var": (R.var, "fm"), "std": (R.std, "fm"), "logsumexp": (R.logsumexp, "fm"),
    "prod": (R.prod, "fm"), "cumsum": (R.cumsum, "fm"), "cumprod": (R.cumprod, "fm"), "all": (R.all, "fm"),
    "any": (R.any, "fm"), "norm": (R.norm, "fm"),
    "softmax": (_softmax.softmax, "f"), "log_softmax": (_softmax.log_softmax, "f"),
    # ***** shape, indexing, linear algebra *****
    "reshape": (S.reshape, "fm"), "view": (S.view, "m"), "flatten": (S.flatten, "fm"),
    "unflatten": (S.unflatten, "m"), "permute": (S.permute, "fm"),
    "transpose": (S.transpose, "fm"), "swapaxes": (S.transpose, "m"),
    "swapdims": (S.transpose, "m"), "t": (S.t, "fm"), "squeeze": (S.squeeze, "fm"),
    "unsqueeze": (S.unsqueeze, "fm"), "expand": (S.expand, "m"), "expand_as": (S.expand_as, "m"),
    "contiguous": (S.contiguous, "m"), "clone": (S.clone, "fm"),
    "cat": (S.cat, "f"), "concat": (S.cat, "f"), "stack": (S.stack, "f"),
    "split": (S.split, "fm"), "chunk": (S.chunk, "fm"), "narrow": (S.narrow, "fm"),
    "matmul": (S.matmul, "fm"), "mm": (S.matmul, "fm"), "bmm": (S.matmul, "fm"),
    "dot": (S.dot, "fm"), "outer": (S.outer, "fm"),
    "gather": (S.gather, "fm"), "index_select": (S.index_select, "fm"),
    "tril": (S.tril, "fm"), "triu": (S.triu, "fm"), "repeat": (S.repeat, "m"),
    "flip": (S.flip, "fm"), "sort": (S.sort, "fm"), "argsort": (S.argsort, "fm"),
    "topk": (S.topk, "fm"), "einsum": (_einsum.einsum, "f"),
    # ***** composites (extra.py) *****
    "amin": (X.amin, "fm"), "clamp_min": (X.clamp_min, "fmi"), "clamp_max": (X.clamp_max, "fmi"),
    "logical_and": (X.logical_and, "fm"), "logical_or": (X.logical_or, "fm"),
    "logical_xor": (X.logical_xor, "fm"), "isclose": (X.isclose, "fm"), "unbind": (X.unbind, "fm"),
    "nan_to_num": (X.nan_to_num, "fmi"),
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
