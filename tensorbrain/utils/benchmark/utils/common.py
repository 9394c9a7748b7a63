"""``tb.utils.benchmark.utils.common`` (``torch.utils.benchmark.utils.common``):
:class:`TaskSpec`, what a timed statement is, and :class:`Measurement` (the same class as
``tb.utils.benchmark.Measurement``), for programs that build measurements themselves."""
from __future__ import annotations

import dataclasses
import textwrap

from .. import Measurement


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """What a Timer runs (torch's ``TaskSpec``): statement, setup and labels.

    Args:
        stmt: the timed statement.
        setup: the setup code.
        global_setup: setup run once (C++ timers in torch; kept).
        label: the benchmark's label.
        sub_label: a sub-label.
        description: a description (a column in ``Compare``).
        env: an environment tag.
        num_threads: the thread count it ran with.
    """

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        """The label (and sub-label), else the statement."""
        sub = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + sub
        if "\n" not in self.stmt:
            return self.stmt + sub
        return f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n" \
               f"{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self) -> str:
        """The setup as torch prints it (empty for ``pass``)."""
        if self.setup == "pass" or not self.setup:
            return ""
        return f"setup:\n{textwrap.indent(self.setup, '  ')}" if "\n" in self.setup \
            else f"setup: {self.setup}"

    def summarize(self) -> str:
        """Title, description and setup, as torch's repr of a measurement starts."""
        sections = [self.title, self.description or "", self.setup_str()]
        return "\n".join(f"{i}\n" if "\n" in i else i for i in sections if i)


__all__ = ["Measurement", "TaskSpec"]
