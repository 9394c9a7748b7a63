"""The layers of tensorbrain/ and which may import which (docs/architecture.md draws them).

Every module under tensorbrain/ is parsed with ``ast`` (nothing is imported) and placed in a layer
by LAYERS below. The tests fail when

- a module imports one from a higher layer, at module level or inside a function (imports under
  ``if TYPE_CHECKING:`` are not counted: they never run);
- a distributed-core module imports the tensor layers at module level (the backends move raw
  arrays, so ``import tensorbrain.distributed`` must not need Tensor);
- two or more modules import each other at module level (a cycle);
- modules import each other when function-level imports count too (a cycle through a function):
  the ones left are listed in KNOWN_FUNCTION_CYCLES, which can only shrink;
- a module writes into another module at import time: sets its global (``other.Tensor =
  Tensor``), an attribute of an object it imported from it (``Tensor.add = add``,
  ``setattr(Tensor, name, fn)``, ``other.Class.attr = v``), or fills one of its global slots
  (``other.HOOK[0] = fn``, also inside a function): a hidden dependency that no import shows;
- a module is in no layer, or a KNOWN entry below no longer occurs (delete it: the list shrinks).

``importlib.import_module("literal", ...)`` counts as an import. A package's module-level
``__getattr__`` may load the package's own submodules lazily (``tb.nn.parallel``,
``tb.distributed``): that is a namespace, as in torch, not a dependency of the package.

Run ``python tests/test_layers.py`` to print which layer imports which, with counts.
"""
from __future__ import annotations

import ast
import collections
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tensorbrain"
# Modules the install makes, with no file in tensorbrain/ to parse: the compiled module (csrc/)
# and what scikit-build-core writes about the build (pyproject.toml's generate).
EXTENSIONS = {"tensorbrain._C", "tensorbrain._build_info"}

# Lowest first; a module may import its own layer and the ones above it in this list. A module's
# layer is the one with its longest matching prefix (a module, or a package and all in it, except
# for NAMESPACES below).
LAYERS: list[tuple[str, list[str]]] = [
    ("base", [  # array namespace, native kernels, config; no Tensor
        "tensorbrain._xp", "tensorbrain._native", "tensorbrain._C", "tensorbrain._build_info", "tensorbrain._kernels",
        "tensorbrain._config", "tensorbrain._dtype", "tensorbrain._device", "tensorbrain._logging",
        "tensorbrain._malloc", "tensorbrain._atomic", "tensorbrain._threads", "tensorbrain._yaml",
        "tensorbrain._shared_memory", "tensorbrain.return_types", "tensorbrain.cuda",
        "tensorbrain.accelerator", "tensorbrain.backends",
        "tensorbrain._real_torch", "tensorbrain._unsupported", "tensorbrain._cuda_memory",
        "tensorbrain._absent_device", "tensorbrain.xpu", "tensorbrain.mps",
        "tensorbrain._classes",
        "tensorbrain.numa", "tensorbrain.mtia", "tensorbrain.torch_version",
        "tensorbrain.__future__",
        "tensorbrain._cuda_streams", "tensorbrain._layout", "tensorbrain._array_data",
        "tensorbrain._gemm",
    ]),
    ("tensor", [  # Tensor, the ops, autograd, autocast
        "tensorbrain", "tensorbrain._ops", "tensorbrain.tensor", "tensorbrain._tensor_base",
        "tensorbrain._factories", "tensorbrain._sampling", "tensorbrain._tensor_legacy",
        "tensorbrain._tensor_hooks", "tensorbrain._tensor_sparse",
        "tensorbrain._tensor_adapters", "tensorbrain._tensor_random", "tensorbrain._legacy_types",
        "tensorbrain._tensor_info", "tensorbrain.sparse", "tensorbrain._sparse_coo", "tensorbrain._sparse_compressed", "tensorbrain.nested", "tensorbrain._batch_norm_parts", "tensorbrain._tensor_views_inplace",
        "tensorbrain.linalg", "tensorbrain._linalg_legacy", "tensorbrain.func", "tensorbrain.overrides", "tensorbrain.version",
        "tensorbrain._torch_extras", "tensorbrain._tensor_str", "tensorbrain._tensor_more", "tensorbrain.storage",
        "tensorbrain.__config__", "tensorbrain.fft", "tensorbrain._signal", "tensorbrain.special",
        "tensorbrain.autograd", "tensorbrain.quasirandom",
        "tensorbrain.amp", "tensorbrain._cuda", "tensorbrain.cpu", "tensorbrain._random",
        "tensorbrain._threads",
        "tensorbrain.random", "tensorbrain._interop", "tensorbrain.utils.dlpack",
        "tensorbrain.utils.checkpoint", "tensorbrain.types",
    ]),
    ("nn", [  # modules, optimizers, data loading, tb.save/tb.load
        "tensorbrain.nn", "tensorbrain.optim", "tensorbrain.distributions", "tensorbrain.jit",
        "tensorbrain.compiler", "tensorbrain._dynamo", "tensorbrain.hub", "tensorbrain.utils",
        "tensorbrain.serialization", "tensorbrain._checkpoint_io", "tensorbrain._torch_format",
        "tensorbrain._torch_save",
        "tensorbrain.ops", "tensorbrain._checkpoint_codec", "tensorbrain.fx",
        "tensorbrain.onnx",  # traces with fx, exports nn layers
        "tensorbrain.library", "tensorbrain._op_schema",
        "tensorbrain.quantization", "tensorbrain.ao",   # observers are modules
    ]),
    ("models", ["tensorbrain.models",  # the model zoo, built from nn
                "tensorbrain.nn._models"]),  # tb.nn.ResNet50, loaded by nn's __getattr__
    ("distributed core", [  # stores, rendezvous, backends: raw arrays, no Tensor at module level
        "tensorbrain.distributed._store", "tensorbrain.distributed.store",
        "tensorbrain.distributed.rendezvous", "tensorbrain.distributed.errors",
        "tensorbrain.distributed._env", "tensorbrain.distributed.backends",
        "tensorbrain.distributed._shm", "tensorbrain.distributed._work",
        "tensorbrain.distributed._fingerprint", "tensorbrain.distributed._liveness",
        "tensorbrain.distributed._nccl_lib", "tensorbrain.distributed._mpi_lib",
        "tensorbrain.distributed._codec",
        "tensorbrain.distributed._observe", "tensorbrain.distributed.elastic",
        "tensorbrain.distributed.timeline",
    ]),
    ("c10d", [  # process groups and collectives on Tensors (torch.distributed's API)
        "tensorbrain.distributed", "tensorbrain.distributed.distributed_c10d",
        "tensorbrain.distributed.device_mesh", "tensorbrain.distributed.algorithms",
        "tensorbrain.distributed.constants", "tensorbrain.distributed.config",
        "tensorbrain.distributed.launcher",
        "tensorbrain.distributed._groups", "tensorbrain.distributed._collectives",
        "tensorbrain.distributed._p2p", "tensorbrain.distributed._object_collectives",
        "tensorbrain.distributed.rpc",
        "tensorbrain.distributed._legacy_paths", "tensorbrain.distributed.autograd",
        "tensorbrain.distributed._functional_collectives",
    ]),
    ("parallel", [  # wrappers that parallelise a model
        "tensorbrain.nn.parallel", "tensorbrain.nn.modules.sync_batchnorm",
        "tensorbrain.utils.data.distributed", "tensorbrain.distributed.fsdp",
        "tensorbrain.distributed.tensor", "tensorbrain.distributed.pipelining",
        "tensorbrain.distributed.pipeline", "tensorbrain.distributed.optim",
        "tensorbrain.distributed.checkpoint", "tensorbrain.distributed._composable",
        "tensorbrain.distributed.algorithms.ddp_comm_hooks", "tensorbrain.futures",
        "tensorbrain.distributed._tensor", "tensorbrain.distributed.algorithms._checkpoint",
        "tensorbrain.distributed.ft", "tensorbrain.distributed.elastic._state",
        "tensorbrain.distributed.algorithms.model_averaging", "tensorbrain.distributed.nn",
        "tensorbrain.distributed.utils",
    ]),
    ("front doors", [  # other frameworks' APIs on top, and the tools
        "tensorbrain.accelerate", "tensorbrain.deepspeed", "tensorbrain.horovod",
        "tensorbrain.ezpz", "tensorbrain.as_torch", "tensorbrain.testing",
        "tensorbrain.benchmarks", "tensorbrain.profiler", "tensorbrain.autograd.profiler",
        "tensorbrain.autograd.profiler_legacy",
    ]),
    ("launchers", [  # tbrun, mp.spawn, the Slurm helpers: start processes, never imported below
        "tensorbrain.multiprocessing",
        "tensorbrain.distributed.run", "tensorbrain.distributed.__main__",
        "tensorbrain.distributed.launch",
        "tensorbrain.distributed._launcher",
        "tensorbrain.distributed._launch_compat", "tensorbrain.distributed._fanout",
        "tensorbrain.distributed._output", "tensorbrain.distributed._guardian",
        "tensorbrain.distributed.slurm",
    ]),
]
# Packages whose modules sit in several layers: the prefix is the package's __init__ only, so a
# new module in them must be placed in LAYERS by name.
NAMESPACES = {"tensorbrain", "tensorbrain.distributed"}
# Layers whose modules may not import the tensor layers at module level (see the module docstring).
NO_TENSOR_AT_IMPORT = {"distributed core"}
TENSOR_LAYERS = {"tensor", "nn", "models"}

# Violations that exist today, each with why it is there. The test fails when one disappears, so
# delete the entry then. Keys: (importer, imported) for a layer violation or an injected global.
KNOWN: dict[tuple[str, str], str] = {
    # torch.nn.modules.batchnorm.SyncBatchNorm, the path timm and Lightning name; a lazy alias
    # in batchnorm's module __getattr__ (the class builds on _norm_base, not on batchnorm, so
    # no cycle).
    ("tensorbrain.nn.modules.batchnorm", "tensorbrain.nn.modules.sync_batchnorm"):
        "nn.modules.batchnorm.SyncBatchNorm alias",
}
KNOWN_CYCLES: dict[frozenset[str], str] = {}
# Cycles once function-level imports count (a module imports another inside a function, which
# imports it back): the ones left, each with why. The test fails on a new one and when one of
# these is gone (delete it: the list shrinks).
KNOWN_FUNCTION_CYCLES: dict[frozenset[str], str] = {}


def _modules(package: pathlib.Path = PACKAGE) -> dict[str, tuple[pathlib.Path, bool]]:
    """Module name -> (file, is a package) for every .py file under ``package``."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        out[".".join(parts)] = (path, is_pkg)
    return out


def _anchor(module: str, is_pkg: bool, level: int) -> str:
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    return ".".join(base[:len(base) - (level - 1)])


def _known_module(name: str, modules) -> str | None:
    while name and name not in modules and name not in EXTENSIONS:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node, module, is_pkg, modules) -> list[str]:
    """The tensorbrain modules one import statement (or import_module call) loads."""
    names = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            base = _anchor(module, is_pkg, node.level) + ("." + base if base else "")
        for a in node.names:  # `from pkg import submodule` loads the submodule
            names.append(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
    elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        name = node.args[0].value
        if name.startswith("."):
            level = len(name) - len(name.lstrip("."))
            pkg_arg = node.args[1].id if len(node.args) > 1 and isinstance(node.args[1], ast.Name) \
                else "__package__"
            anchor = _anchor(module, is_pkg or pkg_arg == "__name__", level)
            name = anchor + "." + name[level:]
        names = [name]
    return [m for m in (_known_module(n, modules) for n in names if n.startswith("tensorbrain"))
            if m]


def _is_import_module(node) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
        or (isinstance(node.func, ast.Name) and node.func.id == "import_module"))


def edges(modules=None) -> list[tuple[str, str, str, int]]:
    """Every import inside tensorbrain/: (importer, imported, how, line).

    ``how`` is "module" (runs at import time), "function" (inside a def or lambda), "lazy" (a
    package's module-level ``__getattr__`` loading its own submodule) or "injected" (a write into
    another module, see :func:`_writes`).
    """
    modules = modules or _modules()
    out = []
    for module, (path, is_pkg) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        aliases: dict = {}  # local name -> tensorbrain module, for injected globals
        _walk(tree, module, is_pkg, modules, "module", out, aliases)
        _writes(tree, module, aliases, out)
    return out


_MODULES = object()  # key of ``aliases``: the names bound to modules (not objects)


def _root(node):
    """The name at the root of ``a.b[c].d`` (None when it is not a plain name)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _writes(tree, module, aliases, out) -> None:
    """"injected" edges: writes into another tensorbrain module. ``aliases`` maps the names this
    module bound by importing (a module, or an object from one: ``from .x import Tensor``) to
    that module. Caught:

    * at import time (module level, class bodies, module-level loops): assigning an attribute or
      an item of such a name (``other.Tensor = Tensor``, ``Tensor.add = add``, ``other.A.b = 1``)
      or ``setattr`` on it;
    * anywhere, inside functions too: assigning an item of another module's global
      (``other.HOOK[0] = fn``, ``HOOK[0] = fn`` after ``from .other import HOOK``): a global slot.
      (An item of an attribute, ``_WORLD.groups[name] = pg``, is state that object owns.)
    """
    modules_bound = aliases.get(_MODULES, set())
    def visit(node, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.Lambda))
            targets = []
            if isinstance(child, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
            for t in targets:
                for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if not isinstance(el, (ast.Attribute, ast.Subscript)):
                        continue
                    src = aliases.get(_root(el))
                    slot = isinstance(el, ast.Subscript) and (
                        isinstance(el.value, ast.Name) or isinstance(el.value, ast.Attribute)
                        and isinstance(el.value.value, ast.Name)
                        and el.value.value.id in modules_bound)
                    if src and src != module and (top or slot):
                        out.append((module, src, "injected", child.lineno))
            if top and isinstance(child, ast.Call) and isinstance(child.func, ast.Name) \
                    and child.func.id == "setattr" and child.args:
                src = aliases.get(_root(child.args[0]))
                if src and src != module:
                    out.append((module, src, "injected", child.lineno))
            visit(child, inner)
    visit(tree, True)


def _walk(node, module, is_pkg, modules, how, out, aliases):
    for child in ast.iter_child_nodes(node):
        child_how = how
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) \
                and how == "module":
            child_how = "lazy" if is_pkg and getattr(child, "name", "") == "__getattr__" \
                and isinstance(node, ast.Module) else "function"
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            continue  # type hints only: never runs
        if isinstance(child, (ast.Import, ast.ImportFrom)) or _is_import_module(child):
            for target in _targets(child, module, is_pkg, modules):
                kind = how
                if how == "lazy" and not target.startswith(module + "."):
                    kind = "function"  # a lazy alias outside the package is a dependency
                out.append((module, target, kind, child.lineno))
                if how == "module" and isinstance(child, ast.Import):
                    for a in child.names:
                        name = (a.asname or a.name).split(".")[0]
                        aliases[name] = target if a.asname else None
                        aliases.setdefault(_MODULES, set()).add(name)
                elif how == "module":  # `from pkg import module [as name]`, or an object of it
                    for a in child.names:
                        if target.endswith("." + a.name) or a.name != "*":
                            aliases[a.asname or a.name] = target
                        if target.endswith("." + a.name):
                            aliases.setdefault(_MODULES, set()).add(a.asname or a.name)
        _walk(child, module, is_pkg, modules, child_how, out, aliases)


def layer_of(module: str) -> str | None:
    """The layer of a module: the one with the longest matching prefix (None: in no layer)."""
    best, best_len = None, -1
    for name, prefixes in LAYERS:
        for p in prefixes:
            inside = module.startswith(p + ".") and p not in NAMESPACES
            if (module == p or inside) and len(p) > best_len:
                best, best_len = name, len(p)
    return best


RANK = {name: i for i, (name, _) in enumerate(LAYERS)}


def violations(all_edges) -> dict[tuple[str, str], list[str]]:
    """(importer, imported) -> where, for each import that breaks a layer rule or injects."""
    out = collections.defaultdict(list)
    for a, b, how, line in all_edges:
        la, lb = layer_of(a), layer_of(b)
        if la is None or lb is None or how == "lazy":
            continue
        if how == "injected":
            out[(a, b)].append(f"{a}:{line} sets a global of {b} (or one of its slots, or an "
                               f"attribute of an object imported from it)")
        elif RANK[lb] > RANK[la]:
            out[(a, b)].append(f"{a}:{line} ({la}) imports {b} ({lb}) {how}-level")
        elif how == "module" and la in NO_TENSOR_AT_IMPORT and lb in TENSOR_LAYERS:
            out[(a, b)].append(f"{a}:{line} ({la}) imports {b} ({lb}) at module level")
    return out


def cycles(all_edges, kinds=("module",)) -> list[frozenset[str]]:
    """Import cycles: the strongly connected components of more than one module, through the
    imports of ``kinds`` (``("module", "function")``: function-level imports count too)."""
    graph = collections.defaultdict(set)
    for a, b, how, _ in all_edges:
        if how in kinds and a != b:
            graph[a].add(b)
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):  # Tarjan's algorithm, recursive (the graph is a few hundred modules)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


# ------------------------------------------------------------------------------------- the tests
_EDGES = None


def _edges():
    global _EDGES
    if _EDGES is None:
        _EDGES = edges()
    return _EDGES


def test_every_module_has_a_layer():
    missing = [m for m in _modules() if layer_of(m) is None]
    assert not missing, f"modules in no layer: {missing}; add each to LAYERS in tests/test_layers.py " \
                        "(and to the diagram in docs/architecture.md)"


def test_no_lower_layer_imports_an_upper_one():
    found = violations(_edges())
    new = {k: v for k, v in found.items() if k not in KNOWN}
    assert not new, "layer violations (see docs/architecture.md):\n" + "\n".join(
        line for v in new.values() for line in v)


def test_known_violations_still_occur():
    found = violations(_edges())
    gone = [k for k in KNOWN if k not in found]
    assert not gone, f"fixed, so delete from KNOWN in tests/test_layers.py: {gone}"


def test_no_module_level_import_cycle():
    found = cycles(_edges())
    new = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    assert not new, f"module-level import cycles: {new}"
    assert not gone, f"fixed, so delete from KNOWN_CYCLES: {gone}"


def test_no_import_cycle_through_function_level_imports():
    found = cycles(_edges(), ("module", "function"))
    new = [sorted(c) for c in found if c not in KNOWN_FUNCTION_CYCLES]
    gone = [sorted(c) for c in KNOWN_FUNCTION_CYCLES if c not in found]
    assert not new, f"import cycles through function-level imports: {new}"
    assert not gone, f"fixed, so delete from KNOWN_FUNCTION_CYCLES: {gone}"


def test_the_checker_sees_bad_imports(tmp_path):
    """The rules fire on a small package: an upward import inside a function, a cycle, an injection."""
    pkg = tmp_path / "tensorbrain"
    (pkg / "distributed" / "backends").mkdir(parents=True)
    (pkg / "nn").mkdir()
    for init in (pkg, pkg / "distributed", pkg / "distributed" / "backends", pkg / "nn"):
        (init / "__init__.py").write_text("")
    (pkg / "tensor.py").write_text("def f():\n    from .nn import functional\n")
    (pkg / "nn" / "functional.py").write_text("from ..tensor import f\n")
    (pkg / "distributed" / "backends" / "tcp.py").write_text(
        "from tensorbrain.tensor import f\nimport tensorbrain._ops.core as core\n")
    (pkg / "_ops").mkdir()
    (pkg / "_ops" / "__init__.py").write_text("")
    (pkg / "_ops" / "core.py").write_text("import tensorbrain.distributed.backends.tcp\n")
    (pkg / "_xp.py").write_text("import tensorbrain._ops.core as core\ncore.Tensor = 1\n")
    found = violations(edges(_modules(pkg)))
    assert ("tensorbrain.tensor", "tensorbrain.nn.functional") in found  # function level, upward
    assert ("tensorbrain.distributed.backends.tcp", "tensorbrain.tensor") in found  # no Tensor
    assert ("tensorbrain._ops.core", "tensorbrain.distributed.backends.tcp") in found
    assert ("tensorbrain._xp", "tensorbrain._ops.core") in found  # injected (and upward)
    assert any("sets a global" in w for w in found[("tensorbrain._xp", "tensorbrain._ops.core")])
    assert frozenset({"tensorbrain._ops.core", "tensorbrain.distributed.backends.tcp"}) in \
        cycles(edges(_modules(pkg)))
    # through a function-level import: tensor -> nn.functional (in a function) -> tensor
    assert frozenset({"tensorbrain.tensor", "tensorbrain.nn.functional"}) in \
        cycles(edges(_modules(pkg)), ("module", "function"))
    assert frozenset({"tensorbrain.tensor", "tensorbrain.nn.functional"}) not in \
        cycles(edges(_modules(pkg)))


def test_the_checker_sees_writes_into_other_modules(tmp_path):
    """setattr on a class another module defines, an attribute of it set at import, a global
    slot filled inside a function: each is an "injected" edge; a module's own class is not."""
    pkg = tmp_path / "tensorbrain"
    (pkg / "_ops").mkdir(parents=True)
    for init in (pkg, pkg / "_ops"):
        (init / "__init__.py").write_text("")
    (pkg / "_tensor_base.py").write_text("class Tensor:\n    pass\nHOOK = [None]\n")
    (pkg / "tensor.py").write_text(
        "from ._tensor_base import Tensor\n"
        "for name in ('a', 'b'):\n    setattr(Tensor, name, len)\n")
    (pkg / "_factories.py").write_text("from ._tensor_base import Tensor\nTensor.zeros = len\n")
    (pkg / "_ops" / "core.py").write_text(
        "from .._tensor_base import HOOK\nfrom .. import _tensor_base as tb\n"
        "def install(fn):\n    HOOK[0] = fn\n    tb.HOOK[0] = fn\n")
    (pkg / "_random.py").write_text(
        "class Mine:\n    pass\nsetattr(Mine, 'x', 1)\nMine.y = 2\n"
        "from ._tensor_base import Tensor\ndef f():\n    Tensor.z = 3  # at run time, not import\n")
    found = violations(edges(_modules(pkg)))
    for importer in ("tensorbrain.tensor", "tensorbrain._factories", "tensorbrain._ops.core"):
        assert (importer, "tensorbrain._tensor_base") in found, importer
    assert len(found[("tensorbrain._ops.core", "tensorbrain._tensor_base")]) == 2
    assert not [k for k in found if k[0] == "tensorbrain._random"]


# Documents that live outside this repository; the code may not send a reader to them.
OUTSIDE_DOCUMENTS = ("../shared", "REFERENCE.md", "BASELINES.md", "STYLE.md")
# Files that still cite one (delete each when fixed; the list only shrinks).
KNOWN_CITING_OUTSIDE: set[str] = set()


def _cited_files():
    for top in ("tensorbrain", "tests", "benchmarks", "examples"):
        yield from sorted((ROOT / top).rglob("*.py"))
    yield from sorted((ROOT / "docs").rglob("*.md"))
    yield ROOT / "README.md"


def test_no_module_over_600_lines():
    """Issue 28: a module is split by job before it passes 600 lines (the report, ``main``,
    prints the same list)."""
    long = {name: n for name, (path, _) in _modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 600}
    assert not long, f"modules over 600 lines (split them by job): {long}"


def test_no_document_outside_the_repo_is_cited():
    citing = set()
    for path in _cited_files():
        if path.exists():
            rel = path.relative_to(ROOT).as_posix()
            if rel != "tests/test_layers.py" and any(
                    d in path.read_text(encoding="utf-8") for d in OUTSIDE_DOCUMENTS):
                citing.add(rel)
    assert not citing - KNOWN_CITING_OUTSIDE, \
        f"cite docs/ or benchmarks/ instead of {OUTSIDE_DOCUMENTS}: {sorted(citing - KNOWN_CITING_OUTSIDE)}"
    assert not KNOWN_CITING_OUTSIDE - citing, \
        f"fixed, so delete from KNOWN_CITING_OUTSIDE: {sorted(KNOWN_CITING_OUTSIDE - citing)}"


def main():  # pragma: no cover - a report for docs/architecture.md
    """Print layer -> layer import counts, the violations, and the modules over 600 lines."""
    counts = collections.Counter()
    for a, b, how, _ in _edges():
        la, lb = layer_of(a), layer_of(b)
        if la != lb and how != "lazy":
            counts[(la, lb, how)] += 1
    for (la, lb, how), n in sorted(counts.items(), key=lambda kv: (RANK.get(kv[0][0], -1),
                                                                     RANK.get(kv[0][1], -1))):
        print(f"{la:>16} -> {lb:<16} {how:<9} {n}")
    for v in violations(_edges()).values():
        print("VIOLATION", *v, sep="\n  ")
    for name, (path, _) in _modules().items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > 600:
            print(f"{lines:5d} {name}")


if __name__ == "__main__":  # pragma: no cover
    sys.path.insert(0, str(ROOT))
    main()
