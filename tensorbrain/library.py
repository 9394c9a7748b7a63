"""``tb.library`` (``torch.library``): custom operators, registered by name and called as
``tb.ops.<namespace>.<name>(...)``, as in torch.

An operator is a schema (``"mylib::scale(Tensor x, float k) -> Tensor"``, parsed by
``tensorbrain/_op_schema.py``) and kernels by dispatch key: ``CPU``, ``CUDA``,
``CompositeExplicitAutograd`` (any device), ``CompositeImplicitAutograd`` (any device, and its
gradient is the one of the operations it runs), ``Autograd`` (it handles gradients itself), and a
fake kernel (``register_fake``) for ``meta`` tensors. A call binds the arguments against the
schema (torch's error messages), picks the kernel for the first tensor argument's device and,
when an input needs a gradient, records one graph node per output whose backward is the one
given to ``register_autograd`` (``setup_context(ctx, inputs, output)`` then
``backward(ctx, *grads)``, one gradient per input). As in torch, backward through a
``custom_op`` with no ``register_autograd`` raises, and a ``Library.impl`` kernel with none is
differentiated through the operations it runs.

Two front doors write into the one registry: ``custom_op`` (a Python function, its schema inferred
from the annotations) and ``Library(ns, "DEF" | "FRAGMENT" | "IMPL")`` with ``define``/``impl``
(and the free functions ``define``/``impl``/``register_kernel``). A ``Library`` object's
registrations go away with it (``_destroy()`` or garbage collection), as torch's do.

>>> import tensorbrain as tb
>>> @tb.library.custom_op("doclib::scale", mutates_args=())
... def scale(x: tb.Tensor, k: float) -> tb.Tensor:
...     return x * k
>>> def setup(ctx, inputs, output):
...     ctx.k = inputs[1]
>>> scale.register_autograd(lambda ctx, g: (g * ctx.k, None), setup_context=setup)
>>> x = tb.tensor([1.0, 2.0], requires_grad=True)
>>> tb.ops.doclib.scale(x, 3.0).sum().backward(); x.grad.tolist()
[3.0, 3.0]

Not supported, refused by name: Triton kernels (``triton_op``, ``wrap_triton``),
``register_torch_dispatch``, ``register_vmap``, ``register_autocast``, ``get_ctx`` (data-dependent
output shapes in fake kernels) and ``opcheck``; ``torch.ops.load_library`` (compiled C++ operator
libraries).
"""
from __future__ import annotations

import weakref

from ._op_schema import FunctionSchema, infer_schema, parse_schema
from ._unsupported import NotSupportedError, unsupported
from .ops import REGISTERED, OpOverload, OpOverloadPacket, _packets, packet

_WHY = "TensorBrain runs Python kernels only; it has no Triton or dispatcher-mode machinery"
_USE = "torch.library.custom_op with a Python kernel and register_autograd"
triton_op = unsupported("torch.library.triton_op", _WHY, _USE)
wrap_triton = unsupported("torch.library.wrap_triton", _WHY, _USE)
register_autocast = unsupported("torch.library.register_autocast", _WHY, _USE)
register_torch_dispatch = unsupported("torch.library.register_torch_dispatch", _WHY, _USE)
register_vmap = unsupported("torch.library.register_vmap", _WHY, _USE)
get_ctx = unsupported("torch.library.get_ctx", "fake kernels run on meta tensors, with no "
                      "symbolic sizes for data-dependent output shapes", "")
get_kernel = unsupported("torch.library.get_kernel", "kernels are not separate objects here",
                         "calling tb.ops.<ns>.<op>")
opcheck = unsupported("torch.library.opcheck", "it checks torch's dispatcher invariants", "")
fallthrough_kernel = unsupported("torch.library.fallthrough_kernel", "TensorBrain has no "
                                 "dispatch keys to fall through", "")

#: The dispatch keys a kernel can be registered under (device types map to them).
KEYS = ("CPU", "CUDA", "Meta", "CompositeExplicitAutograd", "CompositeImplicitAutograd",
        "Autograd", "AutogradCPU", "AutogradCUDA")
_DEVICE_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta", "default":
                "CompositeExplicitAutograd", None: "CompositeExplicitAutograd"}
_OPS: dict[str, _Op] = {}            # "ns::name[.overload]" -> the operator
_DEF_NAMESPACES: dict[str, int] = {}   # namespace -> id of the Library("DEF") owning it


def _tensor_cls():
    from ._tensor_base import TensorBase
    return TensorBase


def _key(key: str | None) -> str:
    key = _DEVICE_KEYS.get(key, key)
    if key not in KEYS:
        raise NotSupportedError(f"dispatch key {key!r} is not supported by TensorBrain: the keys "
                                f"are {', '.join(KEYS)} (or the device types 'cpu', 'cuda', "
                                f"'default')")
    return key


class _Ctx:
    """What ``setup_context`` fills for ``backward`` (torch's ``ctx``): any attribute, plus
    ``save_for_backward``/``saved_tensors`` and ``needs_input_grad``."""

    def __init__(self, needs_input_grad: tuple):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors: tuple = ()

    def save_for_backward(self, *tensors) -> None:
        """Keep tensors for ``backward`` (``ctx.saved_tensors``)."""
        self.saved_tensors = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """Accepted: the gradients of unused outputs are always zeros here."""
        del value

    def mark_non_differentiable(self, *args) -> None:
        """Accepted: non-differentiable outputs simply receive no gradient use."""


class _Op:
    """One registered operator overload: schema, kernels, fake kernel, autograd formula."""

    def __init__(self, qualname: str, schema: FunctionSchema, custom: bool):
        self.qualname, self.schema, self.custom = qualname, schema, custom
        self.ns, _, rest = qualname.partition("::")
        self.name, _, self.overload = rest.partition(".")
        self.kernels: dict[str, object] = {}
        self.fake = None
        self.backward = self.setup_context = None

    def _pick(self, values: list):
        tensors = [v for v in _flat(values) if isinstance(v, _tensor_cls())]
        device = tensors[0].device.type if tensors else "cpu"
        if device == "meta":
            if self.fake is None:
                raise RuntimeError(f"There was no fake impl registered for {self.qualname}. "
                                   f"This is necessary for meta tensors: register one with "
                                   f"tb.library.register_fake")
            return self.fake, "Meta"
        for key in (f"Autograd{device.upper()}", "Autograd", device.upper(),
                    "CompositeExplicitAutograd", "CompositeImplicitAutograd"):
            if key in self.kernels:
                return self.kernels[key], key
        raise NotImplementedError(f"Could not run '{self.qualname}' with arguments from the "
                                  f"'{device.upper()}' backend. '{self.qualname}' is only "
                                  f"available for these backends: {sorted(self.kernels)}. "
                                  f"Register a kernel with Library.impl or "
                                  f"torch.library.register_kernel")

    def __call__(self, *args, **kwargs):
        from .autograd import grad_mode
        values = self.schema.bind(args, kwargs)
        kernel, key = self._pick(values)
        call_args, call_kwargs = self._split(values)
        inputs = [v for v in _flat(values) if isinstance(v, _tensor_cls())]
        wants_grad = grad_mode.is_grad_enabled() and any(t.requires_grad for t in inputs)
        if not wants_grad or key.startswith("Autograd") or key == "Meta" or \
                (self.backward is None and not self.custom) or key == "CompositeImplicitAutograd":
            return kernel(*call_args, **call_kwargs)   # gradients through the kernel's own ops
        with grad_mode.no_grad():
            out = kernel(*call_args, **call_kwargs)
        return self._record(values, inputs, out)

    def _split(self, values: list) -> tuple[list, dict]:
        args = [v for a, v in zip(self.schema.arguments, values) if not a.kwarg_only]
        kwargs = {a.name: v for a, v in zip(self.schema.arguments, values) if a.kwarg_only}
        return args, kwargs

    def _record(self, values: list, inputs: list, out):
        """``out`` with a graph node per Tensor output running the registered backward."""
        from ._ops.core import make
        from ._tensor_base import TensorBase as Tensor
        from .autograd import grad_mode
        many = isinstance(out, (tuple, list))
        outs = list(out) if many else [out]
        ctx = _Ctx(tuple(isinstance(v, Tensor) and v.requires_grad for v in values))
        if self.setup_context is not None:
            self.setup_context(ctx, tuple(values), out)
        label = f"{self.ns}.{self.name}.{self.overload or 'default'}"

        def backward_for(k: int):
            def backward(g):
                if self.backward is None:
                    raise RuntimeError(f"Trying to backward through {label} but no autograd "
                                       f"formula was registered. Please use register_autograd "
                                       f"to add one.")
                grads = [Tensor._wrap(g) if i == k else
                         (o.new_zeros(o.shape) if isinstance(o, Tensor) else None)
                         for i, o in enumerate(outs)]
                with grad_mode.no_grad():
                    res = self.backward(ctx, *grads)
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(values):
                    raise RuntimeError(f"{self.qualname}: the backward registered with "
                                       f"register_autograd returned {len(res)} gradients; the "
                                       f"operator takes {len(values)} inputs (return None for "
                                       f"the non-Tensor ones)")
                pairs = [p for v, r in zip(values, res) for p in
                         (zip(v, _pad(r, len(v))) if isinstance(v, (list, tuple)) else ((v, r),))]
                flat = [r for v, r in pairs if isinstance(v, Tensor)]
                return tuple(None if r is None else r._data for r in flat)
            return backward

        made = [make(o._data, tuple(inputs), backward_for(k), f"{label}Backward",
                     tuple(ctx.saved_tensors))
                if isinstance(o, Tensor) and o.is_floating_point() else o
                for k, o in enumerate(outs)]
        return type(out)(made) if many else made[0]


def _pad(r, n: int) -> list:
    return [None] * n if r is None else list(r)


def _flat(values: list) -> list:
    return [x for v in values for x in (v if isinstance(v, (list, tuple)) else (v,))]


# ***** the registry *****
def _lookup(op) -> _Op:
    """The :class:`_Op` that ``op`` names: ``"ns::name"``, a CustomOpDef, an OpOverload(Packet)."""
    if isinstance(op, CustomOpDef):
        return op._op
    if isinstance(op, OpOverload):
        op = op.name()
    elif isinstance(op, OpOverloadPacket):
        op = op._qualified_op_name
    if not isinstance(op, str) or "::" not in op:
        raise ValueError(f"expected an operator name 'namespace::name' or an operator, got "
                         f"{op!r}")
    found = _OPS.get(op) or _OPS.get(op.removesuffix(".default"))
    if found is None:
        raise RuntimeError(f"operator {op} does not exist: define it first (torch.library."
                           f"custom_op, Library.define or torch.library.define)")
    return found


def _define(qualname: str, schema: str | FunctionSchema, custom: bool) -> _Op:
    if qualname.startswith("aten::"):
        raise NotSupportedError(f"defining {qualname} is not supported by TensorBrain: aten "
                                f"operators are TensorBrain's own (tb.ops.aten)")
    parsed = parse_schema(schema) if isinstance(schema, str) else schema
    parsed.name = qualname.partition(".")[0]
    key = qualname if "." in qualname.partition("::")[2] or not parsed.overload_name \
        else f"{qualname}.{parsed.overload_name}"
    if key in _OPS:
        raise RuntimeError(f"Tried to register an operator ({parsed}) with the same name and "
                           f"overload name multiple times. Each overload's schema should only "
                           f"be registered with a single call to def().")
    _OPS[key] = op = _Op(key, parsed, custom)
    base, _, overload = key.partition(".")
    REGISTERED.setdefault(base, {})[overload or "default"] = op
    _packets.pop(base, None)   # rebuilt with the new overload
    return op


def _forget(key: str) -> None:
    _OPS.pop(key, None)
    qualname, _, overload = key.partition(".")
    table = REGISTERED.get(qualname, {})
    table.pop(overload or "default", None)
    if not table:
        REGISTERED.pop(qualname, None)
    _packets.pop(qualname, None)


# ***** Library *****
class Library:
    """A set of registrations in namespace ``ns``, as ``torch.library.Library``.

    Args:
        ns: the namespace (``torch.ops.<ns>``).
        kind: ``"DEF"`` (owns the namespace: only one per namespace), ``"FRAGMENT"`` (defines
            more operators in it) or ``"IMPL"`` (kernels only).
        dispatch_key: the default key of :meth:`impl`.

    Raises:
        ValueError: an unknown ``kind``.
        RuntimeError: a second ``"DEF"`` library for ``ns``.
    """

    def __init__(self, ns: str, kind: str, dispatch_key: str = ""):
        if kind not in ("DEF", "IMPL", "FRAGMENT"):
            raise ValueError(f"Unsupported kind: {kind}")
        if kind == "DEF" and ns in _DEF_NAMESPACES:
            raise RuntimeError(f"Only a single TORCH_LIBRARY can be used to register the "
                               f"namespace {ns}; please put all of your definitions in a "
                               f"single TORCH_LIBRARY block (use kind 'FRAGMENT' to add to it)")
        if kind == "DEF":
            _DEF_NAMESPACES[ns] = id(self)
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        self._defs: list[str] = []
        self._impls: list[tuple[str, str]] = []
        self._finalizer = weakref.finalize(self, _destroy, ns, kind, id(self), self._defs,
                                           self._impls)

    def __repr__(self):
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})>"

    def define(self, schema: str, alias_analysis: str = "", *, tags=()) -> str:
        """Define an operator from its schema (``"name(Tensor x) -> Tensor"``).

        Args:
            schema: the schema, without the namespace.
            alias_analysis: accepted (``"FROM_SCHEMA"``, ``"CONSERVATIVE"``).
            tags: accepted.

        Returns:
            The operator's name (with its overload: ``"name.overload"``).

        Raises:
            RuntimeError: it is already defined, or the schema does not parse.
        """
        del alias_analysis, tags
        parsed = parse_schema(schema)
        name = parsed.name + (f".{parsed.overload_name}" if parsed.overload_name else "")
        op = _define(f"{self.ns}::{name}", parsed, custom=False)
        self._defs.append(op.qualname)
        return name

    def impl(self, op_name, fn, dispatch_key: str = "", *, with_keyset: bool = False,
             allow_override: bool = False) -> None:
        """Register ``fn`` as ``op_name``'s kernel for ``dispatch_key``.

        Args:
            op_name: the operator's name in this namespace (``"name"``, ``"name.overload"``) or
                an operator handle.
            fn: the kernel, called with the operator's arguments.
            dispatch_key: ``"CPU"``, ``"CUDA"``, ``"CompositeImplicitAutograd"`` ... (default:
                the library's key, else ``CompositeImplicitAutograd``, as torch).
            with_keyset: not supported (there are no dispatch key sets).
            allow_override: accepted.

        Raises:
            NotSupportedError: ``with_keyset=True`` or an unknown dispatch key.
            RuntimeError: the operator is not defined.
        """
        del allow_override
        if with_keyset:
            raise NotSupportedError("Library.impl(with_keyset=True) is not supported by "
                                    "TensorBrain: there are no dispatch key sets")
        qualname = op_name if not isinstance(op_name, str) else f"{self.ns}::{op_name}"
        op = _lookup(qualname)
        key = _key(dispatch_key or self.dispatch_key or "CompositeImplicitAutograd")
        if key == "Meta":
            op.fake = fn
        else:
            op.kernels[key] = fn
        self._impls.append((op.qualname, key))

    def _destroy(self) -> None:
        """Remove this library's definitions and kernels (torch's ``Library._destroy``)."""
        self._finalizer()


def _destroy(ns: str, kind: str, ident: int, defs: list[str],
             impls: list[tuple[str, str]]) -> None:
    for qualname, key in impls:
        op = _OPS.get(qualname)
        if op is not None:
            if key == "Meta":
                op.fake = None
            op.kernels.pop(key, None)
    for qualname in defs:
        _forget(qualname)
    if kind == "DEF" and _DEF_NAMESPACES.get(ns) == ident:
        del _DEF_NAMESPACES[ns]


# ***** custom_op *****
class CustomOpDef:
    """What ``custom_op`` returns: callable like the operator, with the registration methods.

    Args:
        op: the registered operator.
        fn: the Python function it was made from.
    """

    def __init__(self, op: _Op, fn):
        self._op, self._init_fn = op, fn
        self._namespace, self._name = op.ns, op.name
        self.__name__ = op.name
        self.__doc__ = fn.__doc__

    def __repr__(self):
        return f"<CustomOpDef({self._op.qualname})>"

    @property
    def _opoverload(self) -> OpOverload:
        found = packet(self._namespace, self._name)
        if found is None:
            raise RuntimeError(f"{self._op.qualname} was destroyed")
        return found.default

    def __call__(self, *args, **kwargs):
        return self._op(*args, **kwargs)

    def register_kernel(self, device_types, fn=None):
        """Register ``fn`` as the kernel for ``device_types`` (``"cpu"``, ``"cuda"``...).

        Args:
            device_types: a device type or a sequence of them.
            fn: the kernel (omit to use as a decorator).
        """
        return register_kernel(self, device_types, fn)

    def register_fake(self, fn):
        """Register the fake kernel (runs on meta tensors, returns meta tensors of the shapes).

        Args:
            fn: the fake kernel.
        """
        return register_fake(self, fn)

    def register_autograd(self, backward, /, *, setup_context=None) -> None:
        """Make the operator differentiable (see :func:`register_autograd`).

        Args:
            backward: ``backward(ctx, *grads)`` returning one gradient per input.
            setup_context: ``setup_context(ctx, inputs, output)``, saving what backward needs.
        """
        register_autograd(self, backward, setup_context=setup_context)

    def _destroy(self) -> None:
        """Unregister the operator (torch's ``CustomOpDef._destroy``)."""
        _forget(self._op.qualname)


def custom_op(name: str, fn=None, /, *, mutates_args, device_types=None, schema=None,
              tags=None):
    """Turn a Python function into the operator ``name`` (``"ns::op"``), as
    ``torch.library.custom_op``.

    Args:
        name: ``"namespace::name"``.
        fn: the function (omit to use as a decorator); annotated unless ``schema`` is given.
        mutates_args: names of the Tensor arguments the function writes to (``()`` for none,
            ``"unknown"`` for all Tensor arguments).
        device_types: the device types ``fn`` is the kernel for (default: all).
        schema: the schema text (``"(Tensor x) -> Tensor"``) instead of inferring it.
        tags: accepted.

    Returns:
        A :class:`CustomOpDef` (or a decorator making one).

    Raises:
        ValueError: ``name`` has no namespace, or the annotations cannot make a schema.
        RuntimeError: the operator is already defined.
    """
    del tags

    def inner(f):
        if "::" not in name:
            raise ValueError(f"Expected there to be a namespace in {name}, i.e. The operator "
                             f"name should look something like ns::foo")
        text = schema if schema is not None else infer_schema(f, mutates_args=mutates_args)
        op = _define(name, text, custom=True)
        defined = CustomOpDef(op, f)
        register_kernel(defined, device_types, f)
        return defined
    return inner if fn is None else inner(fn)


# ***** the free functions *****
def _types(types) -> list[str]:
    return [_key(t) for t in ((types,) if isinstance(types, str) or types is None else types)]


def register_kernel(op, device_types, func=None, /, *, lib=None):
    """Register ``func`` as ``op``'s kernel for ``device_types``, as
    ``torch.library.register_kernel``.

    Args:
        op: ``"ns::name"``, a CustomOpDef or an operator handle.
        device_types: ``"cpu"``, ``"cuda"``, a sequence of them, or None (every device).
        func: the kernel (omit to use as a decorator).
        lib: a Library to own the registration.
    """
    def inner(f):
        target = _lookup(op)
        for key in _types(device_types):
            target.kernels[key] = f
            if lib is not None:
                lib._impls.append((target.qualname, key))
        return f
    return inner if func is None else inner(func)


def impl(qualname, types, func=None, *, lib=None):
    """Register a kernel, as ``torch.library.impl``.

    ``impl("ns::name", "cpu", fn)`` (device types, ``"default"``, or dispatch keys such as
    ``"CompositeImplicitAutograd"``); also torch's older ``impl(lib, "name", "CPU")`` decorator.

    Args:
        qualname: ``"ns::name"`` (or a Library, in the older form).
        types: device type(s) or dispatch key(s) (the operator name, in the older form).
        func: the kernel (omit to use as a decorator; in the older form, the dispatch key).
        lib: a Library to own the registration.
    """
    if isinstance(qualname, Library):
        library, name, key = qualname, types, func or ""

        def older(f):
            library.impl(name, f, key)
            return f
        return older

    def inner(f):
        target = _lookup(qualname)
        for key in _types(types):
            if key == "Meta":
                target.fake = f
            else:
                target.kernels[key] = f
            if lib is not None:
                lib._impls.append((target.qualname, key))
        return f
    return inner if func is None else inner(func)


def define(qualname, schema: str, *, lib=None, tags=()):
    """Define an operator, as ``torch.library.define("ns::name", "(Tensor x) -> Tensor")``
    (also torch's older ``define(lib, "name(Tensor x) -> Tensor")`` decorator).

    Args:
        qualname: ``"ns::name"`` (or a Library, in the older form).
        schema: the schema without the name.
        lib: a Library to own the definition.
        tags: accepted.
    """
    del tags
    if isinstance(qualname, Library):
        library = qualname
        name = library.define(schema)

        def older(f):
            library.impl(name, f, "CompositeImplicitAutograd")
            return f
        return older
    op = _define(qualname, schema, custom=False)
    if lib is not None:
        lib._defs.append(op.qualname)
    return None


def register_fake(op, func=None, /, *, lib=None, _stacklevel: int = 1):
    """Register the fake kernel of ``op`` (run on ``meta`` tensors: it makes outputs of the
    right shapes and dtypes), as ``torch.library.register_fake``.

    Args:
        op: ``"ns::name"``, a CustomOpDef or an operator handle.
        func: the fake kernel (omit to use as a decorator).
        lib: a Library to own the registration.
        _stacklevel: accepted.
    """
    del _stacklevel

    def inner(f):
        target = _lookup(op)
        target.fake = f
        if lib is not None:
            lib._impls.append((target.qualname, "Meta"))
        return f
    return inner if func is None else inner(func)


impl_abstract = register_fake


def register_autograd(op, backward, /, *, setup_context=None, lib=None) -> None:
    """Make ``op`` differentiable, as ``torch.library.register_autograd``.

    ``setup_context(ctx, inputs, output)`` runs after the forward (``inputs``: every argument in
    schema order) and saves what ``backward(ctx, *grads)`` needs; backward returns one gradient
    per input (None for the non-Tensor ones).

    Args:
        op: ``"ns::name"``, a CustomOpDef or an operator handle.
        backward: the backward function.
        setup_context: the context function, or None.
        lib: accepted.
    """
    del lib
    target = _lookup(op)
    target.backward, target.setup_context = backward, setup_context


__all__ = ["CustomOpDef", "Library", "custom_op", "define", "fallthrough_kernel", "get_ctx",
           "get_kernel", "impl", "impl_abstract", "infer_schema", "opcheck", "register_autocast",
           "register_autograd", "register_fake", "register_kernel", "register_torch_dispatch",
           "register_vmap", "triton_op", "wrap_triton"]
