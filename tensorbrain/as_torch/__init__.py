"""Run an existing PyTorch program on TensorBrain: ``import torch`` resolves to ``tensorbrain``.

Usage::

    python -m tensorbrain.as_torch train.py --epochs 3       # a script, with its arguments
    python -m tensorbrain.as_torch -m mypkg.train             # a module
    tbrun --as-torch --nproc_per_node 2 train.py              # every tbrun worker

For that run only, ``torch`` and every ``torch.X.Y`` import give the TensorBrain module at the same
path (``torch.nn`` is ``tensorbrain.nn``, ``torch.utils.data`` is ``tensorbrain.utils.data``...).
A name TensorBrain lacks fails with an error that names it and says it is a TensorBrain gap, not a
mistake in the program. Child processes inherit the alias: the runner sets ``TENSORBRAIN_AS_TORCH=1``
and puts a small ``sitecustomize`` on ``PYTHONPATH`` that installs it in every Python started
from the run (``mp.spawn`` children, tbrun workers, ``subprocess`` calls to ``python``).

The alias table :data:`ALIASES` maps an import prefix to the module that serves it; other
front doors (accelerate, deepspeed, horovod.torch) can be added there with :func:`register`.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

ENV = "TENSORBRAIN_AS_TORCH"
BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_boot")
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: import prefix -> the module that serves it; ``torch.a.b`` is served by ``tensorbrain.a.b``.
ALIASES: dict[str, str] = {"torch": "tensorbrain"}
# the front doors (docs/accelerate.md, docs/deepspeed.md, docs/horovod.md, docs/ezpz.md)
ALIASES.update({"accelerate": "tensorbrain.accelerate", "deepspeed": "tensorbrain.deepspeed",
                "horovod": "tensorbrain.horovod", "horovod.torch": "tensorbrain.horovod.torch",
                "ezpz": "tensorbrain.ezpz"})
#: exact module names served by a module elsewhere than the prefix rule says.
OVERRIDES: dict[str, str] = {}

_GAP = ("TensorBrain does not provide it yet. This is a gap in TensorBrain's PyTorch "
        "compatibility, not an error in your program (running under tensorbrain.as_torch; "
        "see docs/compat.md)")


def register(prefix: str, target: str) -> None:
    """Serve ``import prefix`` (and ``prefix.*``) from ``target`` (and ``target.*``).

    Args:
        prefix: the import name to serve (e.g. ``'torch'``).
        target: the module that serves it (e.g. ``'tensorbrain'``).
    """
    ALIASES[prefix] = target


def resolve(fullname: str) -> str | None:
    """The real module name behind an aliased import name, or None when it is not aliased.

    Args:
        fullname: the name being imported.
    """
    if fullname in OVERRIDES:
        return OVERRIDES[fullname]
    for prefix, target in ALIASES.items():
        if fullname == prefix or fullname.startswith(prefix + "."):
            return target + fullname[len(prefix):]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, alias: str, real: str):
        self.alias, self.real = alias, real

    def create_module(self, spec):
        try:
            module = importlib.import_module(self.real)
        except ModuleNotFoundError as exc:
            if exc.name and (self.real == exc.name or self.real.startswith(exc.name + ".")):
                raise ModuleNotFoundError(f"No module named {self.alias!r}: {self.real!r} does not "
                                          f"exist, so {_GAP}", name=self.alias) from None
            raise
        self.saved_spec = module.__spec__  # the import system overwrites it; exec_module restores it
        _mark_gaps(module, self.alias)
        _register_shadowed_submodules(module, self.real, self.alias)
        return module

    def exec_module(self, module):
        module.__spec__ = self.saved_spec


def _register_shadowed_submodules(package, real: str, alias: str) -> None:
    """Enter the package's loaded submodules that one of its attributes shadows under their
    alias names in ``sys.modules``.

    ``torch.autograd.gradcheck`` is a function named like the module it lives in, as
    ``torch.nn.utils.weight_norm`` is. Importing the alias ``torch.autograd.gradcheck`` (as
    ``from torch.autograd.gradcheck import GradcheckError`` does) would otherwise make the import
    system set the package's attribute to the module, replacing the function for the whole run.
    Real torch never meets this: its submodule is already in ``sys.modules``.

    Args:
        package: the real TensorBrain package being aliased.
        real: its real name (``tensorbrain.autograd``).
        alias: the name it is imported as (``torch.autograd``).
    """
    prefix = real + "."
    for name, sub in list(sys.modules.items()):
        child = name[len(prefix):]
        if not name.startswith(prefix) or "." in child or sub is None:
            continue
        attr = getattr(package, child, sub)
        if attr is not sub:
            sys.modules.setdefault(f"{alias}.{child}", sub)


class AliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``torch`` and ``torch.*`` (and every other prefix in :data:`ALIASES`)."""

    def find_spec(self, fullname, path=None, target=None):
        """The import spec for ``torch`` or ``torch.*`` (the TensorBrain module), or None.

        Args:
            fullname: the module name being imported.
            path: the parent package's path (unused).
            target: unused (part of the finder protocol).

        Returns:
            A ``ModuleSpec`` whose loader aliases the TensorBrain module, or None for other names.
        """
        real = resolve(fullname)
        if real is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(fullname, real))


class _GapMarkingFinder(importlib.abc.MetaPathFinder):
    """Loads ``tensorbrain.*`` as usual, then marks the module's gaps: a sub-module reached as an
    attribute (``torch.nn`` after ``import torch``) never passes through :class:`AliasFinder`."""

    def find_spec(self, fullname, path=None, target=None):
        alias = _alias_of(fullname)
        if alias is None or "." not in fullname:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module, _run=run, _alias=alias):
            _run(module)
            _mark_gaps(module, _alias)
        spec.loader.exec_module = exec_module  # this spec's own loader instance
        return spec


def _alias_of(real: str) -> str | None:
    for prefix, target in sorted(ALIASES.items(), key=lambda kv: -len(kv[1])):  # most specific
        if real == target or real.startswith(target + "."):
            return prefix + real[len(target):]
    return None


def _mark_gaps(module, alias: str) -> None:
    """Make a missing attribute of an aliased module raise an error naming the TensorBrain gap."""
    if getattr(module, "__tb_gap_getattr__", False):
        return
    previous = module.__dict__.get("__getattr__")

    def __getattr__(name, _previous=previous, _module=module):
        if _previous is not None:
            try:
                return _previous(name)
            except AttributeError:
                pass
        if name.startswith("__"):
            raise AttributeError(f"module {_module.__name__!r} has no attribute {name!r}")
        if hasattr(_module, "__path__"):  # a package: torch's sub-module paths resolve lazily
            try:
                return importlib.import_module(f"{_module.__name__}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{_module.__name__}.{name}":
                    raise
        raise AttributeError(f"module {alias!r} has no attribute {name!r} ({_module.__name__} "
                             f"has none): {_GAP}")

    module.__getattr__ = __getattr__
    module.__tb_gap_getattr__ = True


def annotate(exc: BaseException) -> None:
    """Add a note to an ImportError that a missing TensorBrain name caused (the import system
    replaces our message by 'cannot import name ... from tensorbrain...').

    Args:
        exc: the exception raised by an import.
    """
    if isinstance(exc, ImportError) and (exc.name or "").split(".")[0] in ALIASES.values() and \
            "cannot import name" in str(exc) and not getattr(exc, "__tb_noted__", False):
        note = f"[tensorbrain.as_torch] the name is missing from {exc.name}: {_GAP}"
        if hasattr(exc, "add_note"):
            exc.add_note(note)
        else:  # Python 3.10 has no notes: append it to the message
            exc.args = (f"{exc.args[0] if exc.args else ''}\n{note}", *exc.args[1:])
        exc.__tb_noted__ = True  # type: ignore[attr-defined]


def is_installed() -> bool:
    """Whether the torch alias is installed in this process (see ``install``).

    Returns:
        True when ``import torch`` gives TensorBrain here.
    """
    return any(isinstance(f, AliasFinder) for f in sys.meta_path)


def install() -> None:
    """Install the alias in this process (idempotent); importing real torch afterwards is not
    possible in this process."""
    if is_installed():
        return
    for name in list(sys.modules):
        if resolve(name) is not None and not name.startswith(tuple(ALIASES.values())):
            raise RuntimeError(f"{name!r} is already imported in this process: the alias must be "
                               f"installed before the program imports it")
    sys.meta_path.insert(0, AliasFinder())
    sys.meta_path.insert(1, _GapMarkingFinder())
    for name, module in list(sys.modules.items()):  # TensorBrain modules imported before now
        alias = _alias_of(name)
        if alias is not None and module is not None:
            _mark_gaps(module, alias)
    hook = sys.excepthook

    def excepthook(kind, value, tb, _hook=hook):
        annotate(value)
        _hook(kind, value, tb)
    sys.excepthook = excepthook


def child_environment(env: dict | None = None) -> dict:
    """``env`` (default os.environ) plus what makes Python children install the alias too.

    Args:
        env: the environment to extend (default: ``os.environ``).
    """
    env = dict(os.environ if env is None else env)
    env[ENV] = "1"
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([BOOT_DIR, _PACKAGE_ROOT] +
                                        [p for p in parts if p not in (BOOT_DIR, _PACKAGE_ROOT)])
    return env


def notice() -> str:
    """The one line said at start-up."""
    from .. import __version__
    return (f"tensorbrain.as_torch: `import torch` runs TensorBrain {__version__} for this run "
            f"(torch.* -> tensorbrain.*); missing names are reported as TensorBrain gaps. "
            f"See docs/compat.md")
