"""How much of torch's surface TensorBrain has, weighted by what real programs use.

``python -m tensorbrain.testing.api_coverage`` prints the figures; no torch is needed, as the
two inputs are committed next to this module (``api_data/``):

- ``torch_names.json``: the public names of torch 2.13's modules in :data:`MODULES` and of
  ``torch.Tensor`` (made by ``names --write``, which needs the real torch installed);
- ``usage.json``: for each torch name, the public repositories whose code uses it (made by
  ``scan``, see :mod:`tensorbrain.testing._api_scan`; the counts are committed, never the code).

Each name is **present** (TensorBrain has it at the same path, ``torch.`` read as
``tensorbrain.``), **refusing** (it exists and raises an error that names it as not supported
and says what to use; see :mod:`tensorbrain._unsupported`) or **missing**. The weighted figure
is the share of uses (a name used by 12 repositories counts 12 times) whose name is present and
not refusing; ``tests/testing/test_api_coverage.py`` fails when it drops below
:data:`RATCHET`, and ``docs --write`` regenerates the figures and the missing list in
docs/compat.md.

Commands::

    python -m tensorbrain.testing.api_coverage                 # the report
    python -m tensorbrain.testing.api_coverage --missing 40    # and the 40 most used gaps
    python -m tensorbrain.testing.api_coverage names --write   # torch's names (needs torch)
    python -m tensorbrain.testing.api_coverage scan --write owner/name=DIR_OR_BARE_GIT ...
    python -m tensorbrain.testing.api_coverage docs --write    # the block in docs/compat.md

Example:
    >>> from tensorbrain.testing import api_coverage as cov
    >>> cov.status("torch.nn.Linear"), cov.status("torch.Tensor.view")
    ('present', 'present')
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import types

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "api_data")
USAGE = os.path.join(DATA, "usage.json")
TORCH_NAMES = os.path.join(DATA, "torch_names.json")
DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "docs", "compat.md")

#: The torch modules whose public names the inventory lists (``torch.Tensor``: its methods and
#: attributes).
MODULES = (
    "torch", "torch.Tensor", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.utils",
    "torch.nn.utils.parametrize", "torch.nn.utils.rnn", "torch.optim", "torch.optim.lr_scheduler",
    "torch.utils.data", "torch.autograd", "torch.amp", "torch.cuda", "torch.accelerator",
    "torch.backends", "torch.linalg", "torch.fft", "torch.special", "torch.sparse",
    "torch.random", "torch.testing",
    "torch.distributed", "torch.distributed.fsdp", "torch.distributed.tensor",
    "torch.distributed.tensor.parallel", "torch.distributed.checkpoint",
    "torch.distributed.pipelining", "torch.distributed.device_mesh", "torch.distributed.rpc",
    "torch.distributed.optim", "torch.distributed.elastic",
)

#: The weighted coverage (public names) that CI keeps from going down: raise it when a change
#: raises the figure (``python -m tensorbrain.testing.api_coverage`` prints it).
RATCHET = 0.990

PRESENT, MISSING, REFUSING = "present", "missing", "refusing"


# ***** TensorBrain's side *****
def _tb_path(torch_path: str) -> str:
    return "tensorbrain" + torch_path[len("torch"):]


def _refuses(obj) -> bool:
    return bool(getattr(obj, "__tb_refuses__", None)) if not isinstance(obj, type) else \
        bool(obj.__dict__.get("__tb_refuses__"))


def status(torch_path: str) -> str:
    """Whether TensorBrain has ``torch_path`` at the same place: present, refusing or missing.

    Args:
        torch_path: a dotted torch name, ``"torch.nn.Linear"``, ``"torch.Tensor.view"`` or a
            module such as ``"torch.utils.data"``.

    Returns:
        ``"present"``, ``"refusing"`` (it exists and raises an error naming it as not supported)
        or ``"missing"``.
    """
    parts = _tb_path(torch_path).split(".")
    obj: object = importlib.import_module("tensorbrain")
    for i, part in enumerate(parts[1:], start=1):
        if _refuses(obj):
            return REFUSING
        try:
            obj = getattr(obj, part)
            continue
        except NotImplementedError:
            return REFUSING
        except AttributeError:
            pass
        except Exception:   # a lazy attribute that fails for another reason is not there
            return MISSING
        if not isinstance(obj, types.ModuleType):
            return MISSING
        try:
            obj = importlib.import_module(".".join(parts[:i + 1]))
        except ImportError:
            return MISSING
    return REFUSING if _refuses(obj) else PRESENT


# ***** the committed data *****
def load_usage(path: str = USAGE) -> dict:
    """The committed scan: ``{"repositories": [...], "names": {name: [repo index, ...]}}``.

    Args:
        path: the JSON file.
    """
    with open(path) as f:
        return json.load(f)


def load_torch_names(path: str = TORCH_NAMES) -> dict:
    """The committed inventory of torch's names: ``{"version": ..., "modules": {module: [name]}}``.

    Args:
        path: the JSON file.
    """
    with open(path) as f:
        return json.load(f)


def is_private(name: str) -> bool:
    """Whether a dotted name has a private part (``torch._dynamo.reset``; dunders are public).

    Args:
        name: the dotted name.
    """
    return any(p.startswith("_") and not p.startswith("__") for p in name.split("."))


# ***** figures *****
def weighted(usage: dict, statuses: dict[str, str], private: bool = False) -> tuple[int, int]:
    """``(uses of present names, all uses)`` over the scanned repositories.

    Args:
        usage: :func:`load_usage`'s value.
        statuses: name -> :func:`status`.
        private: count the private names (``torch._dynamo...``) instead of the public ones.
    """
    have = total = 0
    for name, repos in usage["names"].items():
        if is_private(name) != private:
            continue
        total += len(repos)
        have += len(repos) if statuses[name] == PRESENT else 0
    return have, total


def per_module(torch_names: dict) -> dict[str, dict[str, int]]:
    """Unweighted counts per module of :data:`MODULES`: ``{module: {status: count}}``.

    Args:
        torch_names: :func:`load_torch_names`'s value.
    """
    out = {}
    for module, names in torch_names["modules"].items():
        counts = {PRESENT: 0, REFUSING: 0, MISSING: 0}
        for name in names:
            counts[status(f"{module}.{name}")] += 1
        out[module] = counts
    return out


def usage_statuses(usage: dict) -> dict[str, str]:
    """:func:`status` of every name in the scan.

    Args:
        usage: :func:`load_usage`'s value.
    """
    return {name: status(name) for name in usage["names"]}


def missing(usage: dict, statuses: dict[str, str], min_repos: int = 1) -> list[tuple[str, int]]:
    """The public names that are missing, most used first: ``[(name, repositories)]``.

    Args:
        usage: :func:`load_usage`'s value.
        statuses: name -> :func:`status`.
        min_repos: leave out names used by fewer repositories.
    """
    rows = [(n, len(r)) for n, r in usage["names"].items()
            if statuses[n] == MISSING and not is_private(n) and len(r) >= min_repos]
    return sorted(rows, key=lambda nr: (-nr[1], nr[0]))


def refusing(usage: dict, statuses: dict[str, str]) -> list[tuple[str, int]]:
    """The names that exist and refuse, most used first.

    Args:
        usage: :func:`load_usage`'s value.
        statuses: name -> :func:`status`.
    """
    rows = [(n, len(r)) for n, r in usage["names"].items() if statuses[n] == REFUSING]
    return sorted(rows, key=lambda nr: (-nr[1], nr[0]))


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "-"


def report(n_missing: int = 0) -> str:
    """The figures as text (what the command prints).

    Args:
        n_missing: also list this many of the most used missing names.
    """
    usage, names = load_usage(), load_torch_names()
    st = usage_statuses(usage)
    have, total = weighted(usage, st)
    phave, ptotal = weighted(usage, st, private=True)
    lines = [f"scanned: {len(usage['repositories'])} repositories, {len(usage['names'])} torch "
             f"names ({sum(1 for n in usage['names'] if not is_private(n))} public)",
             f"weighted coverage (public names, present and not refusing): {_pct(have, total)} "
             f"({have} of {total} uses)",
             f"private names (torch._dynamo, torch._C, ...): {_pct(phave, ptotal)} "
             f"({phave} of {ptotal} uses)",
             f"names used by >= 2 repositories: "
             f"{sum(1 for n, r in usage['names'].items() if len(r) >= 2 and not is_private(n))}, "
             f"missing {len(missing(usage, st, 2))}",
             "", f"unweighted, torch {names['version']}: module, present, refusing, missing"]
    for module, c in per_module(names).items():
        n = sum(c.values())
        lines.append(f"  {module:<36} {_pct(c[PRESENT], n):>6}  {c[PRESENT]:>4} "
                     f"{c[REFUSING]:>4} {c[MISSING]:>4}")
    if n_missing:
        lines += ["", f"most used missing names (of {len(missing(usage, st))}):"]
        lines += [f"  {r:>3} {n}" for n, r in missing(usage, st)[:n_missing]]
    return "\n".join(lines)


# ***** docs/compat.md's generated block *****
BEGIN = "<!-- api_coverage: begin (generated by python -m tensorbrain.testing.api_coverage docs --write) -->"
END = "<!-- api_coverage: end -->"


def docs_block() -> str:
    """The markdown that ``docs --write`` puts between :data:`BEGIN` and :data:`END`."""
    usage, names = load_usage(), load_torch_names()
    st = usage_statuses(usage)
    have, total = weighted(usage, st)
    phave, ptotal = weighted(usage, st, private=True)
    repos = usage["repositories"]
    out = [BEGIN, "",
           f"Scanned: {len(repos)} public repositories ({', '.join(r['name'] for r in repos)}), "
           f"{len(usage['names'])} distinct torch names used.", "",
           f"- **Weighted coverage: {_pct(have, total)}** of {total} uses of public names "
           f"(a name counts once per repository that uses it); CI's ratchet: "
           f"{100 * RATCHET:.1f}%.",
           f"- Private names (`torch._dynamo`, `torch._C`, ...): {_pct(phave, ptotal)} of "
           f"{ptotal} uses.", "",
           f"Unweighted, per module (torch {names['version']}'s public names):", "",
           "| module | present | refusing | missing | coverage |", "| --- | --- | --- | --- | --- |"]
    for module, c in per_module(names).items():
        n = sum(c.values())
        out.append(f"| `{module}` | {c[PRESENT]} | {c[REFUSING]} | {c[MISSING]} | "
                   f"{_pct(c[PRESENT], n)} |")
    gaps = missing(usage, st)
    out += ["", f"Missing names used by two or more repositories ({len(missing(usage, st, 2))}; "
                f"{len(gaps)} in all), with the number of repositories:", ""]
    out.append(", ".join(f"`{n}` ({r})" for n, r in gaps if r >= 2) or "none.")
    refused = refusing(usage, st)
    if refused:
        out += ["", "Refusing (they exist and raise an error that says what to use):", "",
                ", ".join(f"`{n}` ({r})" for n, r in refused)]
    return "\n".join(out + ["", END])


def write_docs(path: str = DOCS) -> None:
    """Replace the generated block of ``path`` (docs/compat.md) with :func:`docs_block`.

    Args:
        path: the markdown file; it must hold the :data:`BEGIN` and :data:`END` markers.

    Raises:
        ValueError: the markers are not in the file.
    """
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path} has no generated block: put the lines {BEGIN!r} and {END!r} "
                         f"where it goes")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    _write(path, head + docs_block() + tail)


def _write(path: str, text: str) -> None:
    from .. import _atomic

    def fill(tmp):
        with open(tmp, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)   # mkstemp's 0600 is for checkpoints; these are repository files
    _atomic.write(path, fill)


# ***** torch's side (needs the real torch) *****
def torch_inventory() -> dict:
    """The public names of :data:`MODULES` in the installed torch.

    A module's ``__all__`` when it has one, else its public attributes defined in torch (not
    ``typing.Optional`` or ``math`` that it imported); ``torch.Tensor``: its public attributes.

    Raises:
        ImportError: torch is not installed.
    """
    import torch
    modules = {}
    for module in MODULES:
        if module == "torch.Tensor":
            modules[module] = sorted(n for n in dir(torch.Tensor) if not n.startswith("_"))
            continue
        mod = importlib.import_module(module)
        names = getattr(mod, "__all__", None)
        if names is None:
            names = [n for n in dir(mod) if not n.startswith("_") and _defined_in_torch(
                getattr(mod, n), module)]
        modules[module] = sorted({n for n in names if not n.startswith("_")})
    return {"version": torch.__version__.split("+")[0], "modules": modules}


def _defined_in_torch(obj, module: str) -> bool:
    if isinstance(obj, types.ModuleType):
        return obj.__name__.startswith(module + ".")
    owner = getattr(obj, "__module__", None)
    return owner is None or not isinstance(owner, str) or owner.startswith("torch")


def _sources(spec: str) -> tuple[str, str, str]:
    """``[owner/name=]PATH`` as ``(name, directory to scan, commit)``; a bare git directory
    (a ``fetch`` snapshot) is unpacked into a temporary directory, its .py/.ipynb files only."""
    name, _, path = spec.rpartition("=")
    path = os.path.abspath(path)
    if not name:
        parent = os.path.basename(os.path.dirname(path.rstrip("/").removesuffix("/.git")))
        name = parent.replace("+", "/") if "+" in parent else os.path.basename(path)
    git = ["git", f"--git-dir={path}"]
    if not os.path.isfile(os.path.join(path, "HEAD")):   # a checkout
        gitdir = os.path.join(path, ".git")
        commit = subprocess.run(["git", f"--git-dir={gitdir}", "rev-parse", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        return name, path, commit
    commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    dest = tempfile.mkdtemp(prefix="tb-api-scan-")
    listing = subprocess.run(git + ["ls-tree", "-r", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    for line in listing:
        meta, file = line.split("\t", 1)
        _, kind, sha = meta.split()
        if kind != "blob" or not file.endswith((".py", ".ipynb")):
            continue
        blob = subprocess.run(git + ["cat-file", "blob", sha], capture_output=True)
        if blob.returncode:   # a snapshot leaves out files of 4 MiB and more
            continue
        target = os.path.join(dest, file)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(blob.stdout)
    return name, dest, commit


def scan(specs: list[str]) -> dict:
    """Scan repositories and return the usage data (the format of ``usage.json``).

    Args:
        specs: ``[owner/name=]PATH`` each: a checkout, or a bare git directory.
    """
    import shutil

    from ._api_scan import Resolver, scan_tree
    resolver = Resolver()
    repos: list[dict] = []
    names: dict[str, list[str]] = {}
    for spec in specs:
        name, root, commit = _sources(spec)
        try:
            used, files = scan_tree(root, resolver)
        finally:
            if root.startswith(tempfile.gettempdir()) and "tb-api-scan-" in root:
                shutil.rmtree(root, ignore_errors=True)
        repos.append({"name": name, "commit": commit, "files": files})
        print(f"{name}: {files} files, {len(used)} torch names", file=sys.stderr)
        for n in used:
            names.setdefault(n, []).append(name)
    order = sorted(range(len(repos)), key=lambda i: str(repos[i]["name"]).lower())
    repos = [repos[i] for i in order]
    index = {r["name"]: i for i, r in enumerate(repos)}
    return {"torch_version": resolver.torch.__version__.split("+")[0], "repositories": repos,
            "names": {n: sorted(index[r] for r in rs) for n, rs in sorted(names.items())}}


def _dump(obj: dict, path: str) -> None:
    """One line per entry of each top-level list or mapping: small, and diffs read well."""
    parts = []
    for key, value in obj.items():
        if isinstance(value, dict):
            body = ",\n".join(f" {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                               for k, v in value.items())
            parts.append(f"{json.dumps(key)}: {{\n{body}\n}}")
        elif isinstance(value, list):
            body = ",\n".join(" " + json.dumps(v, separators=(",", ":")) for v in value)
            parts.append(f"{json.dumps(key)}: [\n{body}\n]")
        else:
            parts.append(f"{json.dumps(key)}: {json.dumps(value)}")
    _write(path, "{\n" + ",\n".join(parts) + "\n}\n")


def main(argv: list[str] | None = None) -> None:
    """The command line (see the module docstring).

    Args:
        argv: the arguments; default ``sys.argv[1:]``.
    """
    p = argparse.ArgumentParser(prog="python -m tensorbrain.testing.api_coverage",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--missing", type=int, default=0, metavar="N",
                   help="also list the N most used missing names")
    sub = p.add_subparsers(dest="cmd")
    n = sub.add_parser("names", help="list torch's public names (needs torch)")
    n.add_argument("--write", action="store_true", help=f"write {TORCH_NAMES}")
    s = sub.add_parser("scan", help="count the torch names used by repositories (needs torch)")
    s.add_argument("repos", nargs="+", help="[owner/name=]PATH: a checkout or a bare git dir")
    s.add_argument("--write", action="store_true", help=f"write {USAGE}")
    d = sub.add_parser("docs", help="print (or --write) the generated block of docs/compat.md")
    d.add_argument("--write", action="store_true", help=f"write it into {DOCS}")
    args = p.parse_args(argv)
    if args.cmd == "names":
        inv = torch_inventory()
        if args.write:
            _dump(inv, TORCH_NAMES)
        print({m: len(v) for m, v in inv["modules"].items()})
    elif args.cmd == "scan":
        usage = scan(args.repos)
        if args.write:
            _dump(usage, USAGE)
        print(f"{len(usage['repositories'])} repositories, {len(usage['names'])} names")
    elif args.cmd == "docs":
        if args.write:
            write_docs()
        else:
            print(docs_block())
    else:
        print(report(args.missing))


if __name__ == "__main__":
    main()
