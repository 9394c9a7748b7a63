"""A griffe extension for the docs site: doctests in docstrings render as code.

The codebase writes Google-style ``Example:`` sections (and some docstrings end in a bare
``>>>`` block). griffe reads a singular ``Example:`` as an admonition, so its ``>>>`` lines would
render as nested block quotes; this rewrites both forms to an ``Examples:`` section, which
mkdocstrings renders as a highlighted Python console block. The source files are not changed.
"""
import re

import griffe

_BARE_DOCTEST = re.compile(r"(\n\n)((?:>>> .*\n?(?:(?:>>>|\.\.\.).*\n?|[^\n].*\n?)*))")


def _rewrite(text):
    text = re.sub(r"^(\s*)Example:\s*$", r"\1Examples:", text, flags=re.M)
    if "Examples:" in text:
        return text

    def indent(m):
        block = "\n".join("    " + line if line else line for line in m.group(2).split("\n"))
        return m.group(1) + "Examples:\n" + block
    return _BARE_DOCTEST.sub(indent, text, count=1)


class DoctestExamples(griffe.Extension):
    """Turns ``Example:`` and bare ``>>>`` blocks into ``Examples:`` sections."""

    def on_instance(self, *, node, obj, agent, **kwargs):  # noqa: ARG002 (griffe's hook signature)
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = _rewrite(obj.docstring.value)
