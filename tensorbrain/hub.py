"""``tb.hub`` (``torch.hub``): models from a repository's ``hubconf.py``, and weights.

``load(repo_or_dir, model, ...)``, ``list`` and ``help`` import ``hubconf.py`` from a directory
(``source="local"``) or from a GitHub repository (``"owner/name[:ref]"``, ``source="github"``):
the archive of ``ref`` (default ``main``, then ``master``) is downloaded once into
``get_dir()/owner_name_ref`` and reused unless ``force_reload``. As in torch, importing
``hubconf.py`` runs the repository's code: a GitHub repository must be trusted first
(``trust_repo=True`` records it in ``get_dir()/trusted_list``; ``"check"`` and ``False`` ask on
stdin when it is not listed; None warns and goes on). ``hubconf.dependencies`` (module names)
are checked before an entrypoint runs. ``TB_HUB_GITHUB`` (a mirror's base URL; ``file://``
works) replaces ``https://github.com``; torch's check that the ref is not from a fork (a GitHub
API call) is not made.

``download_url_to_file`` fetches a URL (``urllib``; ``file://`` URLs too) into a file,
atomically, checking a SHA-256 prefix when given; ``load_state_dict_from_url`` caches the file
in ``get_dir()/checkpoints`` (``~/.cache/tensorbrain/hub`` unless :func:`set_dir` moved it) and
loads it with ``tb.load`` (safetensors files, and torch's ``.pt`` files where ``tb.load`` reads
them).
"""
from __future__ import annotations

import builtins
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import urllib.error
import urllib.request
import warnings
import zipfile
from urllib.parse import urlparse  # noqa: F401  (torch.hub.urlparse)

from . import _config

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
MODULE_HUBCONF = "hubconf.py"
VAR_DEPENDENCY = "dependencies"
_hub_dir = [None]


# ***** hubconf.py: from a directory, or downloaded from GitHub *****
def _parse_repo_info(github: str) -> tuple[str, str, str | None]:
    if ":" in github:
        repo, ref = github.split(":", 1)
    else:
        repo, ref = github, None
    owner, sep, name = repo.partition("/")
    if not sep or not owner or not name or "/" in name:
        raise ValueError(f'Invalid repo_or_dir {github!r}: expected "repo_owner/repo_name[:ref]" '
                         f'for source="github", or source="local" for a directory')
    return owner, name, ref


def _trusted(owner: str, name: str, repo_dir: str, trust_repo, calling_fn: str) -> None:
    """torch's trust check: ``trust_repo`` True records the repository as trusted; False and
    "check" ask (stdin) unless it is listed (or already downloaded, for None); None warns."""
    hub_dir = get_dir()
    path = os.path.join(hub_dir, "trusted_list")
    listed = set()
    if os.path.exists(path):
        with open(path) as f:
            listed = {line.strip() for line in f}
    owner_name = "_".join([owner, name])
    if trust_repo is True or owner_name in listed or owner in ("pytorch", "facebookresearch"):
        trusted = True
    elif trust_repo is None:
        if not os.path.exists(repo_dir):
            warnings.warn(f"You are about to download and run code from an untrusted "
                          f"repository. In a future release, this won't be allowed. To add "
                          f"the repository to your trusted list, change the command to "
                          f"{calling_fn}(..., trust_repo=False) and a command prompt will "
                          f"appear asking for an explicit confirmation of trust, or "
                          f"{calling_fn}(..., trust_repo=True), which will assume that the "
                          f"prompt is to be answered with 'yes'.", stacklevel=3)
        return
    else:
        answer = input(f"The repository {owner_name} does not belong to the list of trusted "
                       f"repositories and as such cannot be downloaded. Do you trust this "
                       f"repository and wish to add it to the trusted list of repositories "
                       f"(y/N)?")
        trusted = answer.strip().lower() in ("y", "yes")
        if not trusted:
            raise Exception("Untrusted repository.")   # torch's exception type and text
    if trusted and owner_name not in listed:
        os.makedirs(hub_dir, exist_ok=True)
        with open(path, "a") as f:
            f.write(owner_name + "\n")


def _download_repo(owner: str, name: str, ref: str | None, force_reload: bool, trust_repo,
                   calling_fn: str, verbose: bool) -> str:
    """The directory of ``owner/name`` at ``ref`` in the hub cache, downloaded if needed."""
    hub_dir = get_dir()
    os.makedirs(hub_dir, exist_ok=True)
    base = _config.get("TB_HUB_GITHUB").rstrip("/")
    for attempt in ([ref] if ref else ["main", "master"]):
        repo_dir = os.path.join(hub_dir, "_".join([owner, name, attempt.replace("/", "_")]))
        _trusted(owner, name, repo_dir, trust_repo, calling_fn)
        if os.path.exists(repo_dir) and not force_reload:
            if verbose:
                sys.stderr.write(f"Using cache found in {repo_dir}\n")
            return repo_dir
        archive = os.path.join(hub_dir, f"{attempt.replace('/', '_')}.zip")
        url = f"{base}/{owner}/{name}/zipball/{attempt}"
        try:
            download_url_to_file(url, archive, progress=False)
        except (urllib.error.HTTPError, FileNotFoundError, urllib.error.URLError) as e:
            not_found = getattr(e, "code", None) == 404 or isinstance(
                getattr(e, "reason", e), FileNotFoundError)
            if ref is None and attempt == "main" and not_found:
                continue   # torch's default: main, else master
            raise
        if verbose:
            sys.stderr.write(f'Downloading: "{url}" to {archive}\n')
        extract = repo_dir + ".extract"
        shutil.rmtree(extract, ignore_errors=True)
        try:
            with zipfile.ZipFile(archive) as z:
                tops = {n.split("/", 1)[0] for n in z.namelist()}
                z.extractall(extract)
            if len(tops) != 1:
                raise RuntimeError(f"{url}: expected one top directory in the archive, got "
                                   f"{sorted(tops)}")
            shutil.rmtree(repo_dir, ignore_errors=True)
            os.replace(os.path.join(extract, tops.pop()), repo_dir)
        finally:
            shutil.rmtree(extract, ignore_errors=True)
            os.remove(archive)
        return repo_dir
    raise RuntimeError(f"neither 'main' nor 'master' of {owner}/{name} was found at {base}")


def _repo_dir(repo_or_dir: str, source: str, force_reload: bool, trust_repo, calling_fn: str,
              verbose: bool) -> str:
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "local":
        return os.fspath(repo_or_dir)
    return _download_repo(*_parse_repo_info(repo_or_dir), force_reload, trust_repo, calling_fn,
                          verbose)


def _import_hubconf(repo_dir: str):
    path = os.path.join(repo_dir, MODULE_HUBCONF)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found: a hub repository has {MODULE_HUBCONF} at its "
                                f"root")
    sys.path.insert(0, repo_dir)
    try:
        spec = importlib.util.spec_from_file_location(f"hubconf_{abs(hash(repo_dir))}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(repo_dir)
    deps = getattr(module, VAR_DEPENDENCY, None)
    if deps:
        missing = [d for d in deps if importlib.util.find_spec(d) is None]
        if missing:
            raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
    return module


def _entry(module, model: str):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    func = getattr(module, model, None)
    if func is None or not callable(func):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return func


def list(github: str, force_reload: bool = False, skip_validation: bool = False,  # noqa: A001
         trust_repo=None, verbose: bool = True) -> builtins.list[str]:
    """The entrypoints of a hub repository's ``hubconf.py``, as ``torch.hub.list``.

    Args:
        github: ``"owner/name[:ref]"``.
        force_reload: download again even when cached.
        skip_validation: accepted (no fork check is made).
        trust_repo: True, False, "check" or None (see the module docstring).
        verbose: print cache/download messages.

    Returns:
        The public callables of ``hubconf.py``.
    """
    del skip_validation
    module = _import_hubconf(_repo_dir(github, "github", force_reload, trust_repo, "list",
                                       verbose))
    return [f for f in dir(module) if callable(getattr(module, f)) and not f.startswith("_")]


def help(github: str, model: str, force_reload: bool = False,  # noqa: A001
         skip_validation: bool = False, trust_repo=None) -> str | None:
    """The docstring of entrypoint ``model``, as ``torch.hub.help``.

    Args:
        github: ``"owner/name[:ref]"``.
        model: the entrypoint's name.
        force_reload: download again even when cached.
        skip_validation: accepted.
        trust_repo: True, False, "check" or None.
    """
    del skip_validation
    module = _import_hubconf(_repo_dir(github, "github", force_reload, trust_repo, "help",
                                       True))
    return _entry(module, model).__doc__


def load(repo_or_dir: str, model: str, *args, source: str = "github", trust_repo=None,
         force_reload: bool = False, verbose: bool = True, skip_validation: bool = False,
         **kwargs):
    """Run entrypoint ``model`` of a repository's ``hubconf.py`` with ``args``/``kwargs``, as
    ``torch.hub.load``.

    Args:
        repo_or_dir: ``"owner/name[:ref]"`` (``source="github"``) or a directory
            (``source="local"``).
        model: the entrypoint's name.
        *args: passed to the entrypoint.
        source: ``"github"`` or ``"local"``.
        trust_repo: True, False, "check" or None (GitHub only).
        force_reload: download again even when cached.
        verbose: print cache/download messages.
        skip_validation: accepted.
        **kwargs: passed to the entrypoint.

    Returns:
        What the entrypoint returns (a model).

    Raises:
        ValueError: an unknown ``source`` or a malformed GitHub name.
        FileNotFoundError: no ``hubconf.py``.
        RuntimeError: missing dependencies, or no such entrypoint.
    """
    del skip_validation
    repo_dir = _repo_dir(repo_or_dir, source, force_reload, trust_repo, "load", verbose)
    return _entry(_import_hubconf(repo_dir), model)(*args, **kwargs)


def get_dir() -> str:
    """The hub's cache directory."""
    return _hub_dir[0] or os.path.join(os.path.expanduser("~"), ".cache", "tensorbrain", "hub")


def set_dir(d) -> None:
    """Use ``d`` as the hub's cache directory.

    Args:
        d: a directory path.
    """
    _hub_dir[0] = os.path.expanduser(os.fspath(d))


def download_url_to_file(url: str, dst: str, hash_prefix: str | None = None,
                         progress: bool = True) -> None:
    """Download ``url`` to ``dst`` (a temp file renamed at the end), as
    ``torch.hub.download_url_to_file``.

    Args:
        url: an http(s) or file URL.
        dst: the file to write.
        hash_prefix: the start of the expected SHA-256 hex digest, or None.
        progress: accepted (no progress bar).

    Raises:
        RuntimeError: the digest does not start with ``hash_prefix`` (the partial file is
            removed).
        urllib.error.URLError: the download failed.
    """
    dst = os.path.expanduser(dst)
    tmp = f"{dst}.{os.getpid()}.partial"
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url) as src, open(tmp, "wb") as out:   # noqa: S310
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                digest.update(chunk)
                out.write(chunk)
        if hash_prefix is not None and not digest.hexdigest().startswith(hash_prefix):
            raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got '
                               f'"{digest.hexdigest()}") for {url}')
        shutil.move(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_state_dict_from_url(url: str, model_dir: str | None = None, map_location=None,
                             progress: bool = True, check_hash: bool = False,
                             file_name: str | None = None, weights_only: bool = False):
    """The state dict at ``url``, downloaded once into the cache, as
    ``torch.hub.load_state_dict_from_url``.

    Args:
        url: the file's URL.
        model_dir: the cache directory (default ``get_dir()/checkpoints``).
        map_location: passed to ``tb.load``.
        progress: accepted.
        check_hash: check the file name's ``-<sha256 prefix>.`` part.
        file_name: the cached file's name (default the URL's).
        weights_only: passed to ``tb.load``.

    Returns:
        The loaded object (a state dict).
    """
    model_dir = model_dir or os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    name = file_name or os.path.basename(urlparse(url).path)
    cached = os.path.join(model_dir, name)
    if not os.path.exists(cached):
        match = HASH_REGEX.search(name) if check_hash else None
        download_url_to_file(url, cached, match.group(1) if match else None, progress)
    from .serialization import load as _load
    return _load(cached, map_location=map_location, weights_only=weights_only)


__all__ = ["HASH_REGEX", "download_url_to_file", "get_dir", "help", "list", "load",
           "load_state_dict_from_url", "set_dir", "urlparse"]
