"""A griffe extension for the docs site: the Type column of the collectives' Parameters tables.

``tb.distributed``'s collective and point-to-point functions (``_collectives.py``, ``_p2p.py``,
``_object_collectives.py``) have no annotations, and their docstrings name their arguments
without types; the same names mean the same things in all of them (torch's API), so their types
are one table here, :data:`TYPES`, in torch's documentation's terms. An ``Args:`` entry that
already gives a type (``tensor (Tensor): ...``) keeps it; so does every other module, whose
docstrings carry their own types. The source files are not changed.
"""
import re

import griffe

MODULES = ("tensorbrain.distributed._collectives", "tensorbrain.distributed._p2p",
           "tensorbrain.distributed._object_collectives")

#: argument name -> its type, for every collective and point-to-point function
TYPES = {
    "tensor": "Tensor", "tensors": "list[Tensor]", "tensor_list": "list[Tensor]",
    "output_tensor": "Tensor", "input_tensor": "Tensor", "output": "Tensor", "input": "Tensor",
    "input_list": "list[Tensor]", "output_tensor_list": "list[Tensor]",
    "input_tensor_list": "list[Tensor]", "gather_list": "list[Tensor] | None",
    "scatter_list": "list[Tensor] | None", "output_split_sizes": "list[int] | None",
    "input_split_sizes": "list[int] | None",
    "op": "ReduceOp", "group": "ProcessGroup | None", "async_op": "bool",
    "src": "int | None", "dst": "int | None", "group_src": "int | None",
    "group_dst": "int | None", "tag": "int", "device_ids": "list[int] | None",
    "timeout": "timedelta | float | None", "wait_all_ranks": "bool",
    "p2p_op_list": "list[P2POp]", "object_list": "list[Any]", "obj": "Any",
    "object_gather_list": "list[Any] | None", "device": "device | None",
    "scatter_object_output_list": "list[Any]", "scatter_object_input_list": "list[Any] | None",
}
_ENTRY = re.compile(r"^(\s+)(\w+):(\s)", re.M)


def add_types(text: str) -> str:
    """Give each untyped ``name:`` entry of the ``Args:`` section its type from :data:`TYPES`.

    >>> add_types("Sum.\\n\\nArgs:\\n    tensor: in place.\\n    op (str): kept.\\n\\nReturns:\\n    x: y")
    'Sum.\\n\\nArgs:\\n    tensor (Tensor): in place.\\n    op (str): kept.\\n\\nReturns:\\n    x: y'
    """
    start = text.find("Args:\n")
    if start < 0:
        return text
    body_start = start + len("Args:\n")
    end = re.search(r"\n\s*\n\s*\w+:\s*\n|\n\s*\n(?=\S)", text[body_start:])
    stop = body_start + (end.start() if end else len(text) - body_start)

    def typed(m):
        kind = TYPES.get(m[2])
        return f"{m[1]}{m[2]} ({kind}):{m[3]}" if kind else m[0]
    return text[:body_start] + _ENTRY.sub(typed, text[body_start:stop]) + text[stop:]


class CollectiveTypes(griffe.Extension):
    """Types from :data:`TYPES` in the Args of the functions of :data:`MODULES`."""

    def on_function_instance(self, *, node, func, agent, **kwargs):  # noqa: ARG002
        if func.docstring is not None and func.module.path in MODULES:
            func.docstring.value = add_types(shared_sections(func))


def shared_sections(func) -> str:
    """``func``'s docstring with what ``@_collective`` appends at import (the Args ``group`` and
    ``async_op``, Returns and Raises every collective shares, written once in
    ``_collectives.py``): griffe reads the source, so it would not see them."""
    text = func.docstring.value
    if not any(str(d.value) == "_collective" for d in func.decorators):
        return text
    from tensorbrain.distributed import _collectives as c
    # the runtime strings are indented for a function's docstring; griffe's text is dedented
    args = "\n".join(line[4:] for line in c._SHARED_ARGS.split("\n"))
    sections = "\n".join(line[4:] for line in c._SHARED_SECTIONS.split("\n"))
    return text.rstrip() + args + "\n" + sections
