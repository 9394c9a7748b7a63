"""Operator schemas as torch writes them (``"mylib::scale(Tensor x, float k=1.) -> Tensor"``):
parsing, argument binding with torch's error messages, and inferring one from a Python
function's annotations (``torch.library.infer_schema``). Used by ``tb.library``.

>>> s = parse_schema("mylib::scale(int[] x, float k=1., *, bool inplace=False) -> Tensor")
>>> [a.name for a in s.arguments], s.returns
(['x', 'k', 'inplace'], ['Tensor'])
>>> s.bind(([1, 2], 3), {"inplace": True})
[[1, 2], 3.0, True]
"""
from __future__ import annotations

import collections.abc
import inspect
import re
import types
import typing
from dataclasses import dataclass, field

_NO_DEFAULT = object()
_ARG = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:\([\w!|]*\))?(?:\[\d*\])?\??(?:\[\d*\])?\??)"
                  r"(?:\s+(?P<name>\w+))?(?:\s*=\s*(?P<default>.+))?$")


@dataclass
class Argument:
    """One argument of a schema: ``Tensor(a!) out`` is type ``Tensor``, ``mutable`` True."""
    name: str
    type: str
    default: object = _NO_DEFAULT
    kwarg_only: bool = False
    mutable: bool = False
    alias: str = ""

    @property
    def has_default(self) -> bool:
        """Whether the schema gives it a default value."""
        return self.default is not _NO_DEFAULT

    def __str__(self):
        t = self.type
        if self.alias:   # Tensor(a!)? keeps the annotation before the ? / []
            base = re.match(r"\w+", t).group(0)
            t = f"{base}({self.alias}{'!' if self.mutable else ''}){t[len(base):]}"
        s = f"{t} {self.name}"
        return s if not self.has_default else f"{s}={_format_default(self.default)}"


@dataclass
class FunctionSchema:
    """A parsed operator schema (``torch._C.FunctionSchema``'s fields that Python code reads)."""
    name: str
    overload_name: str
    arguments: list[Argument]
    returns: list[str] = field(default_factory=list)

    def __str__(self):
        name = self.name + (f".{self.overload_name}" if self.overload_name else "")
        args, star = [], False
        for a in self.arguments:
            if a.kwarg_only and not star:
                args.append("*")
                star = True
            args.append(str(a))
        rets = self.returns[0] if len(self.returns) == 1 else f"({', '.join(self.returns)})"
        return f"{name}({', '.join(args)}) -> {rets}"

    def bind(self, args: tuple, kwargs: dict) -> list:
        """The value of each argument, in schema order, from a call's ``args``/``kwargs``.

        Args:
            args: the positional arguments.
            kwargs: the keyword arguments.

        Returns:
            One value per argument (defaults filled in).

        Raises:
            RuntimeError: too many arguments, an unknown or missing one, or a value of the wrong
                type (torch's wording, with the declaration).
        """
        positional = [a for a in self.arguments if not a.kwarg_only]
        if len(args) > len(positional):
            raise RuntimeError(f"{self.name}() expected at most {len(positional)} argument(s) "
                               f"but received {len(args)} argument(s). Declaration: {self}")
        known = {a.name for a in self.arguments}
        for k in kwargs:
            if k not in known:
                raise RuntimeError(f"{self.name}() got an unexpected keyword argument '{k}'. "
                                   f"Declaration: {self}")
        values = []
        for i, a in enumerate(self.arguments):
            if i < len(args) and not a.kwarg_only:
                if a.name in kwargs:
                    raise RuntimeError(f"{self.name}() got multiple values for argument "
                                       f"'{a.name}'. Declaration: {self}")
                v = args[i]
            elif a.name in kwargs:
                v = kwargs[a.name]
            elif a.has_default:
                v = a.default
            else:
                raise RuntimeError(f"{self.name}() is missing value for argument '{a.name}'. "
                                   f"Declaration: {self}")
            values.append(_check(self, a, i, v))
        return values


def _check(schema: FunctionSchema, a: Argument, pos: int, v):
    """``v`` converted to ``a``'s type (an int for a float), or torch's type error."""
    from ._tensor_base import TensorBase
    t = a.type
    if v is None and t.endswith("?"):
        return v
    t = t.rstrip("?")
    ok: bool
    if t.startswith("Tensor"):
        ok = isinstance(v, (list, tuple)) and all(isinstance(x, TensorBase) or x is None
                                                  for x in v) if "[" in t \
            else isinstance(v, TensorBase)
    elif "[" in t:
        ok = isinstance(v, (list, tuple)) or (isinstance(v, int) and not isinstance(v, bool))
    elif t in ("float",):
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        v = float(v) if ok else v
    elif t in ("int", "SymInt"):
        ok = isinstance(v, int)
    elif t == "bool":
        ok = isinstance(v, bool)
    elif t == "str":
        ok = isinstance(v, str)
    else:   # Scalar, ScalarType, Device, Layout...: passed on as they are
        ok = True
    if not ok:
        raise RuntimeError(f"{schema.name}() Expected a value of type '{a.type}' for argument "
                           f"'{a.name}' but instead found type '{type(v).__name__}'.\n"
                           f"Position: {pos}\nValue: {v!r}\nDeclaration: {schema}")
    return v


def _format_default(v) -> str:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_format_default(x) for x in v) + "]"
    return str(v)


def _parse_default(text: str):
    text = text.strip()
    if text in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[text]
    if text[:1] in "'\"":
        return text[1:-1]
    if text.startswith("["):
        return [_parse_default(x) for x in _split(text[1:-1])] if text[1:-1].strip() else []
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text   # contiguous_format, Mean, ... (an enum's name)


def _split(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def _parse_arg(text: str, kwarg_only: bool) -> Argument:
    m = _ARG.match(text.strip())
    if not m:
        raise RuntimeError(f"cannot parse the schema argument {text!r}")
    t = m.group("type")
    alias, mutable = "", False
    am = re.search(r"\(([\w|]*)(!?)\)", t)
    if am:
        alias, mutable = am.group(1), am.group(2) == "!"
        t = t[:am.start()] + t[am.end():]
    default = _parse_default(m.group("default")) if m.group("default") else _NO_DEFAULT
    return Argument(m.group("name") or "", t, default, kwarg_only, mutable, alias)


def parse_schema(text: str) -> FunctionSchema:
    """Parse ``"ns::name.overload(Tensor x, *, int n=1) -> (Tensor, Tensor)"``.

    Args:
        text: the schema (the name may be omitted: ``"(Tensor x) -> Tensor"``).

    Returns:
        The :class:`FunctionSchema`.

    Raises:
        RuntimeError: the text is not a schema.
    """
    m = re.match(r"^\s*([\w:.]*)\s*\((.*)\)\s*->\s*(.+?)\s*$", text, re.S)
    if not m:
        raise RuntimeError(f"Expected a schema like 'name(Tensor x) -> Tensor', got {text!r}")
    full, args_text, ret_text = m.groups()
    name, _, overload = full.partition(".")
    args, kwarg_only = [], False
    for part in _split(args_text):
        if part == "*":
            kwarg_only = True
            continue
        args.append(_parse_arg(part, kwarg_only))
    if ret_text.startswith("(") and ret_text.endswith(")"):
        returns = [_parse_arg(r, False).type for r in _split(ret_text[1:-1])]
    else:
        returns = [_parse_arg(ret_text, False).type]
    return FunctionSchema(name, overload, args, returns)


# ***** schemas from annotations (torch.library.infer_schema) *****
def _type_name(ann, what: str) -> str:
    import numpy as np

    from ._device import device as _device_cls
    from ._tensor_base import TensorBase
    origin, targs = typing.get_origin(ann), typing.get_args(ann)
    if origin in (typing.Union, types.UnionType) and type(None) in targs and len(targs) == 2:
        inner = next(a for a in targs if a is not type(None))
        return _type_name(inner, what) + "?"
    if origin in (list, collections.abc.Sequence, typing.Sequence):
        return _type_name(targs[0], what) + "[]"
    if isinstance(ann, type) and issubclass(ann, TensorBase) or \
            getattr(ann, "__name__", "") == "Tensor":
        return "Tensor"
    table = {int: "SymInt", float: "float", bool: "bool", str: "str", np.dtype: "ScalarType",
             _device_cls: "Device"}
    if ann in table:
        return table[ann]
    raise ValueError(f"infer_schema(func): Parameter {what} has unsupported type {ann}. "
                     f"The valid types are: Tensor, int, float, bool, str, dtype, device, "
                     f"Optional and list of those.")


def infer_schema(prototype_function, /, *, mutates_args, op_name: str | None = None) -> str:
    """The schema of ``prototype_function`` from its type annotations, as
    ``torch.library.infer_schema``.

    Args:
        prototype_function: a function with annotated parameters and return.
        mutates_args: the names of the Tensor arguments it writes to (``()`` for none,
            ``"unknown"`` for all).
        op_name: put in front of the schema when given.

    Returns:
        The schema text (``"(Tensor x, SymInt n=2) -> Tensor"``).

    Raises:
        ValueError: a parameter is unannotated, of a type schemas cannot hold, or named in
            ``mutates_args`` and not a parameter.
    """
    sig = inspect.signature(prototype_function)
    hints = typing.get_type_hints(prototype_function)
    if mutates_args != "unknown":
        unknown = set(mutates_args) - set(sig.parameters)
        if unknown:
            raise ValueError(f"{sorted(unknown)} in mutates_args were not found in the custom "
                             f"op's signature. mutates_args should contain the names of all "
                             f"args that the custom op mutates")
    params, star = [], False
    for idx, (pname, p) in enumerate(sig.parameters.items()):
        if pname not in hints:
            raise ValueError(f"infer_schema(func): Parameter {pname} must have a type "
                             f"annotation.")
        t = _type_name(hints[pname], pname)
        if p.kind == p.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        if mutates_args == "unknown" and t.startswith("Tensor") or pname in mutates_args:
            if not t.startswith("Tensor"):
                raise ValueError(f"infer_schema(func): Parameter {pname} is in mutates_args "
                                 f"but only Tensors can be mutated")
            t = f"Tensor(a{idx}!){t[len('Tensor'):]}"
        text = f"{t} {pname}"
        if p.default is not inspect.Parameter.empty:
            text += f"={_format_default(p.default)}"
        params.append(text)
    ret = hints.get("return", None)
    rets = _return_types(ret)
    out = f"({', '.join(params)}) -> {rets}"
    return f"{op_name}{out}" if op_name else out


def _return_types(ret) -> str:
    if ret is None or ret is type(None):
        return "()"
    if typing.get_origin(ret) is tuple:
        return "(" + ", ".join(_type_name(a, "return") for a in typing.get_args(ret)) + ")"
    return _type_name(ret, "return")
