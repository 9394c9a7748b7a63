"""A griffe extension for the docs site: doctests and Sphinx roles in docstrings render well.

The codebase writes Google-style ``Example:`` sections (and some docstrings end in a bare
``>>>`` block). griffe reads a singular ``Example:`` as an admonition, so its ``>>>`` lines would
render as nested block quotes; this rewrites both forms to an ``Examples:`` section, which
mkdocstrings renders as a highlighted Python console block. Some docstrings name objects with
Sphinx roles (``:func:`zeros```, ``:class:`~tb.device```), which Markdown shows as literal text
(":func:" and a code span); they become plain code spans. The source files are not changed.
"""
import re

import griffe

_BARE_DOCTEST = re.compile(r"(\n\n)((?:>>> .*\n?(?:(?:>>>|\.\.\.).*\n?|[^\n].*\n?)*))")


_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|obj|exc):`(~?)([^`]+)`")


def strip_roles(text):
    """``:func:`a.x``` and ``:class:`~a.b``` -> ```a.x``` and ```b``` (Markdown code spans;
    ``~`` shows the last name only, as Sphinx does)."""
    return _ROLE.sub(lambda m: f"`{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}`", text)


def _rewrite(text):
    text = re.sub(r"^(\s*)Example:\s*$", r"\1Examples:", text, flags=re.M)
    if "Examples:" in text:
        return text

    def indent(m):
        block = "\n".join("    " + line if line else line for line in m.group(2).split("\n"))
        return m.group(1) + "Examples:\n" + block
    return _BARE_DOCTEST.sub(indent, text, count=1)


class DoctestExamples(griffe.Extension):
    """Turns ``Example:`` and bare ``>>>`` blocks into ``Examples:`` sections, and Sphinx roles
    into code spans."""

    def on_instance(self, *, node, obj, agent, **kwargs):  # noqa: ARG002 (griffe's hook signature)
        if obj.docstring is None:
            return
        if ">>>" in obj.docstring.value:
            obj.docstring.value = _rewrite(obj.docstring.value)
        if ":`" in obj.docstring.value:
            obj.docstring.value = strip_roles(obj.docstring.value)
