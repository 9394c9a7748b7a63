"""The docstrings of the elementwise ops of the op table (``tb.add``, ``Tensor.exp``, ...).

The op table (``table.py``) makes ``tb.<name>`` and ``Tensor.<name>`` from one function per op,
and several ops are made by factories (the comparisons, ``floor``/``isnan``/...), so their
docstrings are kept here, keyed by the op's name in ``table.OPS``, and set on the functions when
the table is imported: the way ``torch/_torch_docs.py`` documents torch's generated functions.
An op whose function already has a docstring in its own module keeps that one
(tests/test_docstrings.py checks both). ``__test__`` makes ``doctest`` run the examples
(tests/test_docstring_examples.py).

The first argument is called ``a`` (torch: ``input``); as a method it is the tensor itself.
"""

_IMPORT = ">>> import tensorbrain as tb"


def _binary(summary, name, args, example, result, extra="", raises=""):
    """A binary op's docstring: summary, Args (``a``, ``b`` and ``args``), Returns, Example."""
    rows = "".join(f"    {k}: {v}\n" for k, v in args)
    raises = f"Raises:\n    {raises}\n\n" if raises else ""
    return (f"{summary}\n\nAs ``torch.{name}``: ``a`` and ``b`` broadcast, and the result's "
            f"dtype follows torch's promotion (an integer tensor with a Python float gives the "
            f"default float dtype).{extra}\n\nArgs:\n"
            f"    a: a tensor (or a number, when ``b`` is a tensor).\n"
            f"    b: a tensor or a number.\n{rows}\nReturns:\n"
            f"    Tensor: the broadcast shape of ``a`` and ``b``.\n\n{raises}"
            f"Example:\n    {_IMPORT}\n    >>> {example}\n    {result}\n")


def _unary(summary, name, example_in, result, grad="", returns="a new tensor of ``a``'s shape"):
    """A unary op's docstring: summary, Args, Returns, Example."""
    grad = f" {grad}" if grad else ""
    return (f"{summary}\n\nAs ``torch.{name}``.{grad}\n\nArgs:\n    a: the input tensor.\n\n"
            f"Returns:\n    Tensor: {returns}.\n\n"
            f"Example:\n    {_IMPORT}\n    >>> tb.{name}(tb.tensor({example_in})).tolist()\n"
            f"    {result}\n")


def _compare(symbol, name, result):
    """A comparison's docstring."""
    return (f"Elementwise ``a {symbol} b``, as ``torch.{name}``: a bool tensor, no gradient.\n\n"
            f"``a`` and ``b`` broadcast; a number on the left is compared the other way round.\n\n"
            f"Args:\n    a: a tensor (or a number, when ``b`` is a tensor).\n"
            f"    b: a tensor or a number.\n\n"
            f"Returns:\n    Tensor: a bool tensor of the broadcast shape.\n\n"
            f"Example:\n    {_IMPORT}\n"
            f"    >>> tb.{name}(tb.tensor([1, 2, 3]), 2).tolist()\n    {result}\n")


_NO_GRAD = "Piecewise constant: no gradient flows through it."
_BOOL = "returns a bool tensor of ``a``'s shape"

DOCS = {
    # ***** arithmetic *****
    "add": _binary("Elementwise ``a + alpha * b``.", "add",
                   [("alpha", "the multiplier of ``b`` (default 1).")],
                   "tb.add(tb.tensor([1.0, 2.0]), tb.tensor([3.0, 4.0]), alpha=2).tolist()",
                   "[7.0, 10.0]", " ``a + b`` and ``a.add(b)`` call it."),
    "sub": _binary("Elementwise ``a - alpha * b``.", "sub",
                   [("alpha", "the multiplier of ``b`` (default 1).")],
                   "tb.sub(tb.tensor([5.0, 5.0]), tb.tensor([1.0, 2.0])).tolist()",
                   "[4.0, 3.0]", " ``tb.subtract`` is the same function."),
    "mul": _binary("Elementwise ``a * b``.", "mul", [],
                   "tb.mul(tb.tensor([1.0, 2.0]), 3).tolist()", "[3.0, 6.0]",
                   " ``tb.multiply`` is the same function."),
    "div": _binary("Elementwise ``a / b``, true division unless ``rounding_mode`` is given.",
                   "div", [("rounding_mode", "None (true division: integer inputs give the "
                            "default float dtype), ``'trunc'`` (round toward zero) or "
                            "``'floor'`` (round down); with two integer tensors these keep "
                            "the integer dtype.")],
                   "tb.div(tb.tensor([7, -7]), 2, rounding_mode='floor').tolist()",
                   "[3, -4]", " ``tb.divide`` and ``tb.true_divide`` are the same function.",
                   raises="ValueError: another ``rounding_mode``."),
    "pow": _binary("Elementwise ``a ** b``.", "pow", [],
                   "tb.pow(tb.tensor([1.0, 2.0, 3.0]), 2).tolist()", "[1.0, 4.0, 9.0]"),
    "maximum": _binary("The elementwise larger of ``a`` and ``b``.", "maximum", [],
                       "tb.maximum(tb.tensor([1.0, 5.0]), tb.tensor([3.0, 2.0])).tolist()",
                       "[3.0, 5.0]", " The gradient goes to the larger one (split on ties)."),
    "minimum": _binary("The elementwise smaller of ``a`` and ``b``.", "minimum", [],
                       "tb.minimum(tb.tensor([1.0, 5.0]), tb.tensor([3.0, 2.0])).tolist()",
                       "[1.0, 2.0]", " The gradient goes to the smaller one (split on ties)."),
    "neg": _unary("Elementwise ``-a``.", "neg", "[1.0, -2.0]", "[-1.0, 2.0]"),
    "where": """Elements of ``a`` where ``cond`` is True, else of ``b``, as ``torch.where``.

``cond``, ``a`` and ``b`` broadcast; the gradient of each of ``a`` and ``b`` flows where it was
chosen. (The one-argument form ``torch.where(cond)`` is not there.)

Args:
    cond: a bool tensor.
    a: the values where ``cond`` is True (a tensor or a number).
    b: the values where ``cond`` is False (a tensor or a number).

Returns:
    Tensor: the broadcast shape of the three.

Example:
    >>> import tensorbrain as tb
    >>> x = tb.tensor([-1.0, 2.0, -3.0])
    >>> tb.where(x > 0, x, 0.0).tolist()
    [0.0, 2.0, 0.0]
""",
    "clamp": """``a`` with every element limited to ``[min, max]``, as ``torch.clamp``.

The gradient flows where ``a`` lies within the bounds. ``tb.clip`` is the same function.

Args:
    a: the input tensor.
    min: the lower bound (a number or a tensor broadcastable with ``a``), or None for none.
    max: the upper bound, or None for none.

Returns:
    Tensor: a new tensor of ``a``'s shape.

Raises:
    ValueError: neither ``min`` nor ``max`` given.

Example:
    >>> import tensorbrain as tb
    >>> tb.clamp(tb.tensor([-2.0, 0.5, 3.0]), min=-1.0, max=1.0).tolist()
    [-1.0, 0.5, 1.0]
""",
    # ***** unary math *****
    "exp": _unary("Elementwise ``e ** a``.", "exp", "[0.0]", "[1.0]"),
    "log": _unary("Elementwise natural logarithm (``-inf`` at 0, NaN below).", "log", "[1.0]",
                  "[0.0]"),
    "sqrt": _unary("Elementwise square root (NaN below 0).", "sqrt", "[4.0, 9.0]", "[2.0, 3.0]"),
    "rsqrt": _unary("Elementwise ``1 / sqrt(a)``.", "rsqrt", "[4.0, 0.25]", "[0.5, 2.0]"),
    "abs": _unary("Elementwise absolute value.", "abs", "[-1.5, 2.0]", "[1.5, 2.0]",
                  "The gradient at 0 is 0, as torch's."),
    "sign": _unary("Elementwise sign: -1, 0 or 1 in ``a``'s dtype.", "sign", "[-2.0, 0.0, 3.0]",
                   "[-1.0, 0.0, 1.0]", _NO_GRAD),
    "sin": _unary("Elementwise sine (radians).", "sin", "[0.0]", "[0.0]"),
    "cos": _unary("Elementwise cosine (radians).", "cos", "[0.0]", "[1.0]"),
    "log1p": _unary("Elementwise ``log(1 + a)``, accurate for small ``a``.", "log1p", "[0.0]",
                    "[0.0]"),
    "expm1": _unary("Elementwise ``exp(a) - 1``, accurate for small ``a``.", "expm1", "[0.0]",
                    "[0.0]"),
    "erf": _unary("Elementwise error function.", "erf", "[0.0]", "[0.0]"),
    "square": _unary("Elementwise ``a * a``.", "square", "[-3.0, 2.0]", "[9.0, 4.0]"),
    "reciprocal": _unary("Elementwise ``1 / a``.", "reciprocal", "[2.0, 4.0]", "[0.5, 0.25]"),
    "floor": _unary("Elementwise round down.", "floor", "[-1.5, 1.5]", "[-2.0, 1.0]", _NO_GRAD),
    "ceil": _unary("Elementwise round up.", "ceil", "[-1.5, 1.5]", "[-1.0, 2.0]", _NO_GRAD),
    "trunc": _unary("Elementwise round toward zero.", "trunc", "[-1.5, 1.5]", "[-1.0, 1.0]",
                    _NO_GRAD),
    "round": """Elementwise round half to even, as ``torch.round`` (and NumPy).

No gradient flows through it.

Args:
    a: the input tensor.
    decimals: round to this many decimal places (default 0; negative: to tens, hundreds, ...).

Returns:
    Tensor: a new tensor of ``a``'s shape.

Example:
    >>> import tensorbrain as tb
    >>> tb.round(tb.tensor([0.5, 1.5, 2.25])).tolist()
    [0.0, 2.0, 2.0]
""",
    "isnan": _unary("Where ``a`` is NaN.", "isnan", "[1.0, float('nan')]", "[False, True]",
                    returns=_BOOL),
    "isinf": _unary("Where ``a`` is +inf or -inf.", "isinf", "[1.0, float('-inf')]",
                    "[False, True]", returns=_BOOL),
    "isfinite": _unary("Where ``a`` is neither infinite nor NaN.", "isfinite",
                       "[1.0, float('inf')]", "[True, False]", returns=_BOOL),
    "logical_not": _unary("Elementwise logical not (nonzero counts as True).", "logical_not",
                          "[0, 2]", "[True, False]", returns=_BOOL),
    # ***** activations *****
    "relu": _unary("Elementwise ``max(a, 0)``.", "relu", "[-1.0, 2.0]", "[0.0, 2.0]"),
    "sigmoid": _unary("Elementwise logistic function ``1 / (1 + exp(-a))``, without overflow.",
                      "sigmoid", "[0.0]", "[0.5]"),
    "tanh": _unary("Elementwise hyperbolic tangent.", "tanh", "[0.0]", "[0.0]"),
    "silu": _unary("Elementwise ``a * sigmoid(a)`` (swish).", "silu", "[0.0]", "[0.0]"),
    "gelu": """Elementwise Gaussian error linear unit ``a * Phi(a)``, as ``torch.nn.functional.gelu``.

Args:
    a: the input tensor.
    approximate: ``'none'`` (the exact erf form) or ``'tanh'`` (the tanh approximation).

Returns:
    Tensor: a new tensor of ``a``'s shape.

Raises:
    ValueError: another ``approximate``.

Example:
    >>> import tensorbrain as tb
    >>> tb.gelu(tb.tensor([0.0, 1.0])).tolist()   # 1.0 * Phi(1.0)
    [0.0, 0.8413447141647339]
""",
    # ***** comparisons *****
    "lt": _compare("<", "lt", "[True, False, False]"),
    "gt": _compare(">", "gt", "[False, False, True]"),
    "le": _compare("<=", "le", "[True, True, False]"),
    "ge": _compare(">=", "ge", "[False, True, True]"),
    "eq": _compare("==", "eq", "[False, True, False]"),
    "ne": _compare("!=", "ne", "[True, False, True]"),
}

__test__ = DOCS
