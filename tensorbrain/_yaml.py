"""The YAML subset Accelerate's config files use, read without PyYAML (which is not a
dependency): nested mappings by indentation, scalars (strings, numbers, booleans as YAML 1.1
reads them, null) and inline lists. One parser for ``tbrun --config_file`` and
``tensorbrain.accelerate``. A file that is a JSON object (what ``accelerate config default``
writes, even to ``default_config.yaml``: YAML reads JSON) is read as JSON.
"""
from __future__ import annotations

import json


def _scalar(text: str):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    low = text.lower()
    if low in ("true", "yes"):
        return True
    if low in ("false", "no"):
        return False
    if low in ("null", "~", ""):
        return None
    if text.startswith("[") and text.endswith("]"):
        return [_scalar(v) for v in text[1:-1].split(",") if v.strip()]
    if text.startswith("{") and text.endswith("}") and text[1:-1].strip() == "":
        return {}
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse(text: str) -> dict:
    """Parse the YAML subset Accelerate's config files use: nested mappings by indentation,
    scalars (strings, numbers, booleans, null) and inline lists; or a JSON object (YAML reads
    JSON). Raises ``ValueError`` naming the line for anything else.

    Args:
        text: the file's text.

    Returns:
        The mapping.

    Raises:
        ValueError: a line outside the subset, or a JSON file that is not a JSON object.

    Example:
        >>> parse("num_processes: 2\\nfsdp_config: {}\\n")
        {'num_processes': 2, 'fsdp_config': {}}
        >>> parse('{\\n  "num_processes": 2,\\n  "use_cpu": true\\n}')
        {'num_processes': 2, 'use_cpu': True}
    """
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"accelerate config (JSON) line {exc.lineno}: {exc.msg}") from None
        if not isinstance(data, dict):
            raise ValueError("accelerate config: expected a JSON object at the top level")
        return data
    root: dict = {}
    stack = [(-1, root)]
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip() or line.strip() == "---":
            continue
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        if body.startswith("- ") or ":" not in body:
            raise ValueError(f"accelerate config line {lineno}: {raw!r} is not 'key: value' "
                             f"(block lists are not supported; write lists inline as [a, b])")
        key, _, value = body.partition(":")
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if value.strip() == "":
            child: dict = {}
            parent[key.strip()] = child
            stack.append((indent, child))
        else:
            parent[key.strip()] = _scalar(value)
    return root
