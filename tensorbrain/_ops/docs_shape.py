"""The docstrings of the reductions and the shape, indexing and linear-algebra ops of the op table.

Kept here and set on the op functions when ``table.py`` is imported, as ``docs_math.py`` does
for the elementwise ops (see there why). ``__test__`` makes ``doctest`` run the examples.
The first argument is called ``a`` (torch: ``input``); as a method it is the tensor itself.
"""

_IMPORT = ">>> import tensorbrain as tb"
_DIM = ("dim: the dimension or tuple of dimensions to reduce (negative counts from the end); "
        "None: all of them.")
_KEEPDIM = "keepdim: keep the reduced dimensions with size 1."


def _reduce(summary, name, example, result, args=(), returns="the reduced tensor", extra=""):
    """A reduction's docstring: ``a``, ``dim``, ``keepdim`` and ``args``."""
    rows = "".join(f"    {r}\n" for r in (_DIM, _KEEPDIM, *args))
    extra = f"\n\n{extra}" if extra else ""
    return (f"{summary}\n\nAs ``torch.{name}``.{extra}\n\nArgs:\n    a: the input tensor.\n"
            f"{rows}\nReturns:\n    Tensor: {returns}.\n\n"
            f"Example:\n    {_IMPORT}\n    >>> x = tb.tensor([[1.0, 2.0], [3.0, 4.0]])\n"
            f"    >>> {example}\n    {result}\n")


def _doc(summary, args, returns, example, raises=(), torch_name=None):
    """Any op's docstring from its parts; ``example`` is the lines after the import."""
    rows = "".join(f"    {k}: {v}\n" for k, v in args)
    raise_rows = "".join(f"    {k}: {v}\n" for k, v in raises)
    raises_sec = f"\nRaises:\n{raise_rows}" if raises else ""
    lines = "".join(f"    {line}\n" for line in example)
    return (f"{summary}\n\nArgs:\n{rows}\nReturns:\n    {returns}\n{raises_sec}\n"
            f"Example:\n    {_IMPORT}\n{lines}")


_A = ("a", "the input tensor.")

DOCS = {
    # ***** reductions *****
    "sum": _reduce("The sum of the elements over ``dim``.", "sum", "tb.sum(x, dim=0).tolist()",
                   "[4.0, 6.0]", ("dtype: accumulate and return in this dtype; integer and bool "
                                  "inputs are summed as int64 by default, as torch does.",)),
    "mean": _reduce("The mean of the elements over ``dim``.", "mean",
                    "x.mean(dim=1, keepdim=True).tolist()", "[[1.5], [3.5]]",
                    ("dtype: compute in this dtype; required for integer inputs (a "
                     "RuntimeError otherwise, as torch).",)),
    "min": _reduce("The smallest element; with ``dim``, the smallest values and their indices; "
                   "with a tensor, the elementwise minimum.", "min",
                   "tb.min(x, dim=1).indices.tolist()", "[0, 0]",
                   returns="the minimum (0-d) without ``dim``; a named tuple ``(values, "
                   "indices)`` with ``dim``; ``tb.minimum(a, dim)`` when ``dim`` is a tensor",
                   extra="The gradient goes to the element(s) chosen."),
    "amax": _reduce("The largest values over ``dim`` (no indices; the gradient is split "
                    "evenly between ties).", "amax", "tb.amax(x, dim=0).tolist()", "[3.0, 4.0]"),
    "argmax": _reduce("The index of the largest element (over all elements, flattened, "
                      "without ``dim``).", "argmax", "x.argmax().item(), x.argmax(dim=1).tolist()",
                      "(3, [1, 1])", returns="an int64 tensor of indices"),
    "argmin": _reduce("The index of the smallest element (over all elements, flattened, "
                      "without ``dim``).", "argmin", "x.argmin(dim=0).tolist()", "[0, 0]",
                      returns="an int64 tensor of indices"),
    "std": _reduce("The standard deviation over ``dim``: ``sqrt(var)``.", "std",
                   "tb.std(tb.tensor([1.0, 3.0])).item()", "1.4142135381698608",
                   ("unbiased: False for the population form (``correction=0``); torch's old "
                    "spelling.", "correction: subtract this from the count (default 1, "
                    "Bessel's correction).")),
    "logsumexp": _reduce("``log(sum(exp(a)))`` over ``dim``, without overflow.", "logsumexp",
                         "tb.logsumexp(tb.zeros(2), dim=0).item() == tb.log(tb.tensor(2.0)).item()",
                         "True"),
    "prod": _reduce("The product of the elements over ``dim``.", "prod",
                    "tb.prod(x, dim=1).tolist()", "[2.0, 12.0]",
                    extra="The gradient is ``prod / a``: exact only where ``a`` has no zero."),
    "cumsum": """The cumulative sum along ``dim``, as ``torch.cumsum``.

Args:
    a: the input tensor.
    dim: the dimension to accumulate along.
    dtype: accumulate and return in this dtype; integer and bool inputs give int64 by default.

Returns:
    Tensor: a tensor of ``a``'s shape.

Example:
    >>> import tensorbrain as tb
    >>> tb.cumsum(tb.tensor([1, 2, 3]), dim=0).tolist()
    [1, 3, 6]
""",
    "all": _reduce("Whether every element is nonzero (True) over ``dim``.", "all",
                   "tb.all(x > 1.0, dim=1).tolist()", "[False, True]",
                   returns="a bool tensor"),
    "any": _reduce("Whether some element is nonzero (True) over ``dim``.", "any",
                   "tb.any(x > 3.0, dim=1).tolist()", "[False, True]",
                   returns="a bool tensor"),
    # ***** shape *****
    "reshape": _doc("``a``'s elements in a new shape: a view when possible, else a copy, as "
                    "``torch.reshape``.",
                    [_A, ("*shape", "the new shape, as ints or one tuple; one -1 is inferred.")],
                    "Tensor: ``a``'s elements in ``shape``.",
                    [">>> tb.arange(6).reshape(2, -1).tolist()", "[[0, 1, 2], [3, 4, 5]]"],
                    [("RuntimeError", "the shape does not hold ``a``'s number of elements.")]),
    "flatten": _doc("``a`` with dimensions ``start_dim`` to ``end_dim`` merged into one, as "
                    "``torch.flatten`` (a 0-d tensor becomes 1-d).",
                    [_A, ("start_dim", "the first dimension to merge."),
                     ("end_dim", "the last dimension to merge (inclusive).")],
                    "Tensor: the flattened tensor (a view when possible).",
                    [">>> tb.zeros(2, 3, 4).flatten(1).shape", "tb.Size([2, 12])"]),
    "unflatten": _doc("``a`` with dimension ``dim`` split into ``sizes``, as "
                      "``Tensor.unflatten``.",
                      [_A, ("dim", "the dimension to split."),
                       ("sizes", "its new sizes (their product is its size; one -1 is inferred).")],
                      "Tensor: the reshaped tensor.",
                      [">>> tb.zeros(2, 12).unflatten(1, (3, 4)).shape", "tb.Size([2, 3, 4])"]),
    "permute": _doc("A view of ``a`` with its dimensions reordered, as ``torch.permute``.",
                    [_A, ("*dims", "the new order of the dimensions, as ints or one tuple.")],
                    "Tensor: a view; the gradient is permuted back.",
                    [">>> tb.zeros(2, 3, 4).permute(2, 0, 1).shape", "tb.Size([4, 2, 3])"],
                    [("RuntimeError", "``dims`` is not a permutation of ``a``'s dimensions.")]),
    "transpose": _doc("A view of ``a`` with dimensions ``dim0`` and ``dim1`` swapped, as "
                      "``torch.transpose`` (also ``Tensor.swapaxes`` and ``swapdims``).",
                      [_A, ("dim0", "a dimension."), ("dim1", "the other dimension.")],
                      "Tensor: a view.",
                      [">>> tb.zeros(2, 3).transpose(0, 1).shape", "tb.Size([3, 2])"]),
    "t": _doc("The transpose of a matrix, as ``torch.t``: 0-d and 1-d tensors are returned "
              "as they are.", [_A], "Tensor: a view.",
              [">>> tb.tensor([[1, 2]]).t().tolist()", "[[1], [2]]"],
              [("RuntimeError", "``a`` has more than 2 dimensions.")]),
    "squeeze": _doc("A view of ``a`` without dimensions of size 1, as ``torch.squeeze``.",
                    [_A, ("dim", "only this dimension (or tuple of dimensions), where its size "
                          "is 1; None: all size-1 dimensions.")],
                    "Tensor: a view.",
                    [">>> tb.zeros(1, 3, 1).squeeze().shape, tb.zeros(1, 3, 1).squeeze(0).shape",
                     "(tb.Size([3]), tb.Size([3, 1]))"]),
    "unsqueeze": _doc("A view of ``a`` with a dimension of size 1 inserted at ``dim``, as "
                      "``torch.unsqueeze``.",
                      [_A, ("dim", "where the new dimension goes (negative: counted from the "
                            "end of the result).")],
                      "Tensor: a view.",
                      [">>> tb.zeros(3).unsqueeze(-1).shape", "tb.Size([3, 1])"],
                      [("IndexError", "``dim`` is out of range.")]),
    "expand": _doc("A view of ``a`` broadcast to ``sizes`` without copying, as "
                   "``Tensor.expand``.",
                   [_A, ("*sizes", "the new sizes, as ints or one tuple; -1 keeps a dimension's "
                         "size; extra leading dimensions are added.")],
                   "Tensor: a view (write to it only through a copy).",
                   [">>> tb.tensor([[1], [2]]).expand(2, 3).tolist()", "[[1, 1, 1], [2, 2, 2]]"],
                   [("RuntimeError", "a non-1 size differs from ``sizes``, or ``sizes`` has "
                     "fewer dimensions than ``a``.")]),
    "expand_as": _doc("``a.expand(*other.shape)``, as ``Tensor.expand_as``.",
                      [_A, ("other", "the tensor whose shape to expand to.")],
                      "Tensor: a view.",
                      [">>> tb.tensor([1, 2]).expand_as(tb.zeros(2, 2)).tolist()",
                       "[[1, 2], [1, 2]]"]),
    "contiguous": _doc("``a`` itself when its elements are in row-major order, else a "
                       "row-major copy, as ``Tensor.contiguous``.",
                       [_A], "Tensor: ``a`` or a copy.",
                       [">>> x = tb.zeros(2, 3)", ">>> x.contiguous() is x", "True"]),
    "clone": _doc("A copy of ``a`` that keeps the graph (the gradient flows back to ``a``), as "
                  "``torch.clone``.", [_A], "Tensor: the copy.",
                  [">>> x = tb.ones(2)", ">>> y = x.clone(); y[0] = 5.0; x.tolist()",
                   "[1.0, 1.0]"]),
    "cat": _doc("The tensors joined along an existing dimension, as ``torch.cat`` "
                "(``tb.concat`` is the same function).",
                [("tensors", "a non-empty sequence of tensors on one device, of equal shapes "
                  "except in ``dim``."), ("dim", "the dimension to join along.")],
                "Tensor: the joined tensor; the gradient is split back to each.",
                [">>> tb.cat([tb.zeros(1, 2), tb.ones(2, 2)]).shape", "tb.Size([3, 2])"],
                [("RuntimeError", "no tensors, tensors on different devices, or shapes that "
                  "differ outside ``dim``.")]),
    "stack": _doc("The tensors joined along a new dimension, as ``torch.stack``.",
                  [("tensors", "a non-empty sequence of tensors of one shape."),
                   ("dim", "where the new dimension goes.")],
                  "Tensor: one more dimension than the inputs.",
                  [">>> tb.stack([tb.zeros(3), tb.ones(3)], dim=1).shape", "tb.Size([3, 2])"],
                  [("RuntimeError", "no tensors, or tensors of different shapes.")]),
    "split": _doc("``a`` cut into pieces along ``dim``, as ``torch.split``.",
                  [_A, ("split_size_or_sections", "an int (pieces of that size, the last one "
                        "smaller if needed) or a list of sizes that add up to the size of "
                        "``dim``."), ("dim", "the dimension to cut.")],
                  "tuple[Tensor, ...]: views of ``a``.",
                  [">>> [p.tolist() for p in tb.arange(5).split(2)]", "[[0, 1], [2, 3], [4]]"],
                  [("RuntimeError", "the sizes do not add up to the size of ``dim``.")]),
    "chunk": _doc("``a`` cut into ``chunks`` pieces of ``ceil(size / chunks)`` along ``dim`` "
                  "(fewer when they run out), as ``torch.chunk``.",
                  [_A, ("chunks", "how many pieces."), ("dim", "the dimension to cut.")],
                  "tuple[Tensor, ...]: views of ``a``.",
                  [">>> [p.tolist() for p in tb.arange(5).chunk(2)]", "[[0, 1, 2], [3, 4]]"]),
    "narrow": _doc("A view of ``a[..., start:start + length, ...]`` along ``dim``, as "
                   "``torch.narrow``.",
                   [_A, ("dim", "the dimension."), ("start", "the first index."),
                    ("length", "how many elements.")],
                   "Tensor: a view.",
                   [">>> tb.arange(6).narrow(0, 2, 3).tolist()", "[2, 3, 4]"]),
    # ***** linear algebra *****
    "matmul": _doc("The matrix product with NumPy's ``@`` broadcasting, as ``torch.matmul``. "
                   "``tb.mm`` and ``tb.bmm`` are the same function: they broadcast too, where "
                   "torch's insist on 2-d and 3-d inputs.",
                   [("a", "a tensor (1-d: a vector)."), ("b", "a tensor on the same device.")],
                   "Tensor: the product.",
                   [">>> (tb.ones(2, 3) @ tb.ones(3, 4)).shape", "tb.Size([2, 4])"],
                   [("RuntimeError", "the inner sizes differ, or the tensors are on different "
                     "devices.")]),
    "dot": _doc("The inner product of two 1-d tensors, as ``torch.dot``.",
                [("a", "a 1-d tensor."), ("b", "a 1-d tensor of the same size.")],
                "Tensor: a 0-d tensor.",
                [">>> tb.dot(tb.tensor([1.0, 2.0]), tb.tensor([3.0, 4.0])).item()", "11.0"],
                [("RuntimeError", "an input is not 1-d.")]),
    "outer": _doc("The outer product ``a[i] * b[j]`` of two 1-d tensors, as ``torch.outer``.",
                  [("a", "a 1-d tensor."), ("b", "a 1-d tensor.")],
                  "Tensor: a ``(len(a), len(b))`` tensor.",
                  [">>> tb.outer(tb.tensor([1, 2]), tb.tensor([1, 10])).tolist()",
                   "[[1, 10], [2, 20]]"]),
    # ***** indexing *****
    "gather": _doc("``out[i][j] = a[i][index[i][j]]`` along ``dim`` (for ``dim=1``), as "
                   "``torch.gather``; repeated indices add up in the gradient.",
                   [_A, ("dim", "the dimension to index."),
                    ("index", "an int64 tensor with as many dimensions as ``a``.")],
                   "Tensor: ``index``'s shape.",
                   [">>> x = tb.tensor([[1, 2], [3, 4]])",
                    ">>> tb.gather(x, 1, tb.tensor([[1], [0]])).tolist()", "[[2], [3]]"],
                   [("RuntimeError", "``index`` has another number of dimensions than ``a``.")]),
    "index_select": _doc("The entries of ``a`` at ``index`` along ``dim``, as "
                         "``torch.index_select``.",
                         [_A, ("dim", "the dimension to index."),
                          ("index", "a 1-d int64 tensor.")],
                         "Tensor: ``a``'s shape with ``len(index)`` at ``dim`` (a copy).",
                         [">>> tb.arange(5).index_select(0, tb.tensor([4, 0])).tolist()",
                          "[4, 0]"],
                         [("IndexError", "``index`` has more than one dimension.")]),
    "tril": _doc("``a`` with the elements above the ``diagonal``-th diagonal of its last two "
                 "dimensions set to 0, as ``torch.tril``.",
                 [_A, ("diagonal", "0: the main diagonal; k > 0 above it; k < 0 below it.")],
                 "Tensor: a new tensor of ``a``'s shape.",
                 [">>> tb.ones(2, 2).tril().tolist()", "[[1.0, 0.0], [1.0, 1.0]]"]),
    "triu": _doc("``a`` with the elements below the ``diagonal``-th diagonal of its last two "
                 "dimensions set to 0, as ``torch.triu``.",
                 [_A, ("diagonal", "0: the main diagonal; k > 0 above it; k < 0 below it.")],
                 "Tensor: a new tensor of ``a``'s shape.",
                 [">>> tb.ones(2, 2).triu(1).tolist()", "[[0.0, 1.0], [0.0, 0.0]]"]),
    "flip": _doc("``a`` with the order of the elements reversed along ``dims``, as "
                 "``torch.flip``.",
                 [_A, ("dims", "a dimension or a tuple of dimensions.")],
                 "Tensor: a new tensor of ``a``'s shape.",
                 [">>> tb.tensor([[1, 2], [3, 4]]).flip(1).tolist()", "[[2, 1], [4, 3]]"]),
    "argsort": _doc("The indices that sort ``a`` along ``dim``, as ``torch.argsort`` (a stable "
                    "sort always).",
                    [_A, ("dim", "the dimension to sort along."),
                     ("descending", "largest first."),
                     ("stable", "accepted for torch's signature; the sort is always stable.")],
                    "Tensor: int64 indices of ``a``'s shape.",
                    [">>> tb.tensor([3, 1, 2]).argsort().tolist()", "[1, 2, 0]"]),
    "topk": _doc("The ``k`` largest (or smallest) elements along ``dim`` and their indices, "
                 "as ``torch.topk``.",
                 [_A, ("k", "how many."), ("dim", "the dimension."),
                  ("largest", "False: the ``k`` smallest."),
                  ("sorted", "accepted for torch's signature; the result is always sorted.")],
                 "tuple: a named tuple ``(values, indices)``.",
                 [">>> tb.tensor([1.0, 5.0, 3.0]).topk(2).indices.tolist()", "[1, 2]"],
                 [("RuntimeError", "``k`` is larger than the size of ``dim``.")]),
}

__test__ = DOCS
