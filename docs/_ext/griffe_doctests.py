"""A griffe extension for the docs site: doctests, Sphinx roles and page names in docstrings
render well.

The codebase writes Google-style ``Example:`` sections (and some docstrings end in a bare
``>>>`` block). griffe reads a singular ``Example:`` as an admonition, so its ``>>>`` lines would
render as nested block quotes; this rewrites both forms to an ``Examples:`` section, which
mkdocstrings renders as a highlighted Python console block. Some docstrings name objects with
Sphinx roles (``:func:`zeros```, ``:class:`~tb.device```), which Markdown shows as literal text
(":func:" and a code span); they become plain code spans. Docstrings send readers to the guide
pages as ``docs/ddp.md`` (``See docs/ddp.md``, which is what ``help()`` should show); on the site
that becomes a link to the page (``../ddp.md`` from ``api/``), when the page exists. The source
files are not changed.
"""
import pathlib
import re

import griffe

_DOCS = pathlib.Path(__file__).resolve().parents[1]
# docs/<page>.md[#anchor], bare or as a code span (``docs/x.md`` or `docs/x.md`)
_PAGE = re.compile(r"(``|`)?(?<![\w/.\[])(?<!\]\()docs/([\w\-]+(?:/[\w\-]+)*\.md)(#[\w\-]+)?(\1)?")


def link_pages(text):
    """``docs/ddp.md`` -> ``[docs/ddp.md](../ddp.md)`` (from an ``api/`` page), for pages that
    exist; a path in a code span keeps its code look inside the link.

    >>> link_pages("See docs/ddp.md#buckets and ``docs/fsdp.md``.")
    'See [docs/ddp.md#buckets](../ddp.md#buckets) and [`docs/fsdp.md`](../fsdp.md).'
    """
    def link(m):
        tick, page, anchor, close = m[1] or "", m[2], m[3] or "", m[4] or ""
        if tick and tick != close or not (_DOCS / page).is_file():
            return m[0]
        label = f"docs/{page}{anchor}"
        return f"[{'`' + label + '`' if tick else label}](../{page}{anchor})"
    return _PAGE.sub(link, text)

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
    """Turns ``Example:`` and bare ``>>>`` blocks into ``Examples:`` sections, Sphinx roles
    into code spans and ``docs/<page>.md`` into links."""

    def on_instance(self, *, node, obj, agent, **kwargs):  # noqa: ARG002 (griffe's hook signature)
        if obj.docstring is None:
            return
        if ">>>" in obj.docstring.value:
            obj.docstring.value = _rewrite(obj.docstring.value)
        if ":`" in obj.docstring.value:
            obj.docstring.value = strip_roles(obj.docstring.value)
        if "docs/" in obj.docstring.value:
            obj.docstring.value = link_pages(obj.docstring.value)
