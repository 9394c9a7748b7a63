"""Accelerate's config files, read with PyYAML when it is installed (``yaml.safe_load``: no
code runs) and otherwise with our reader of the subset those files use: nested mappings by
indentation, scalars (strings, numbers, booleans as YAML 1.1 reads them, null), inline lists and
block lists of scalars (``- BertLayer`` lines, as ``accelerate config`` writes
``fsdp_transformer_layer_cls_to_wrap``), at the key's indentation or deeper. One parser for
``tbrun --config_file`` and ``tensorbrain.accelerate``. A file that is a JSON object (what
``accelerate config default`` writes, even to ``default_config.yaml``: YAML reads JSON) is read as
JSON.
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
    """Parse an Accelerate config file: with PyYAML when installed, else the subset reader
    (module doc); a JSON object is read as JSON. Raises ``ValueError`` naming the line for
    anything else.

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
        >>> parse("fsdp_config:\\n  wrap:\\n  - BertLayer\\n  - GPT2Block\\n")
        {'fsdp_config': {'wrap': ['BertLayer', 'GPT2Block']}}
    """
    try:
        import yaml
    except ImportError:
        return parse_subset(text)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ValueError(f"accelerate config{where}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"accelerate config: expected a mapping at the top level, got "
                         f"{type(data).__name__}")
    return data


def parse_subset(text: str) -> dict:
    """:func:`parse` without PyYAML: the subset of the module doc, or a JSON object.

    Args:
        text: the file's text.

    Returns:
        The mapping.

    Raises:
        ValueError: a line outside the subset (it is named), or a JSON file that is not a JSON
            object.

    Example:
        >>> parse_subset("a:\\n- 1\\n- 'no'\\nb: no\\n")
        {'a': [1, 'no'], 'b': False}
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
    # open containers: (indent of the key that owns it, the container, its owner, the key)
    stack: list = [(-1, root, None, None)]
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip() or line.strip() == "---":
            continue
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        if body == "-" or body.startswith("- "):
            item = body[1:].strip()
            while stack[-1][0] > indent:
                stack.pop()
            key_indent, box, owner, key = stack[-1]
            if owner is not None and box == {}:          # the key's first item: a list after all
                box = owner[key] = []
                stack[-1] = (key_indent, box, owner, key)
            if not isinstance(box, list) or item.startswith("- ") or \
                    (":" in item and item[:1] not in "'\"["):
                raise ValueError(f"accelerate config line {lineno}: {raw!r}: only lists of "
                                 f"scalars under a key are in the subset read without PyYAML "
                                 f"(pip install pyyaml reads any YAML)")
            box.append(_scalar(item))
            continue
        if ":" not in body:
            raise ValueError(f"accelerate config line {lineno}: {raw!r} is not 'key: value' "
                             f"or a '- item' of a list")
        key, _, value = body.partition(":")
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if isinstance(parent, list):
            raise ValueError(f"accelerate config line {lineno}: {raw!r}: a key inside a list")
        if value.strip() == "":
            child: dict = {}
            parent[key.strip()] = child
            stack.append((indent, child, parent, key.strip()))
        else:
            parent[key.strip()] = _scalar(value)
    return root
