"""``tb.hub`` (``torch.hub``): downloading weights.

``download_url_to_file`` fetches a URL (``urllib``; ``file://`` URLs too) into a file,
atomically, checking a SHA-256 prefix when given; ``load_state_dict_from_url`` caches the file
in ``get_dir()/checkpoints`` (``~/.cache/tensorbrain/hub`` unless :func:`set_dir` moved it) and
loads it with ``tb.load`` (safetensors files, and torch's ``.pt`` files where ``tb.load`` reads
them). ``load``/``list``/``help`` run a GitHub repository's ``hubconf.py``: TensorBrain does not
download and execute code, so they are refused by name.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import urllib.request
from urllib.parse import urlparse  # noqa: F401  (torch.hub.urlparse)

from ._unsupported import unsupported

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
_hub_dir = [None]

_WHY = "it downloads a repository and runs its hubconf.py, and TensorBrain does not run " \
       "downloaded code"
load = unsupported("torch.hub.load", _WHY, "the model class from tb.models and "
                   "tb.hub.load_state_dict_from_url for its weights")
list = unsupported("torch.hub.list", _WHY)  # noqa: A001  (torch's name)
help = unsupported("torch.hub.help", _WHY)  # noqa: A001


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
