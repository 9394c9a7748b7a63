"""``tb.distributed.elastic.metrics`` (``torch.distributed.elastic.metrics``): named metric
values sent to a handler per group. ``configure(ConsoleMetricHandler())`` prints them as
torch's does; the default handler drops them (``NullMetricHandler``), as torch's.

>>> from tensorbrain.distributed.elastic import metrics
>>> metrics.configure(metrics.ConsoleMetricHandler(), "demo")
>>> metrics.put_metric("restarts", 1, "demo")   # doctest: +ELLIPSIS
[...][demo]: restarts=1
"""
from __future__ import annotations

import abc
import time
from typing import NamedTuple


class MetricData(NamedTuple):
    """One value: when, which group, which name, the value."""

    timestamp: float
    group_name: str
    name: str
    value: int


class MetricHandler(abc.ABC):
    """Where metric values go: subclasses implement :meth:`emit`."""

    @abc.abstractmethod
    def emit(self, metric_data: MetricData) -> None:
        """Handle one value.

        Args:
            metric_data: the value.
        """


class ConsoleMetricHandler(MetricHandler):
    """Print each value as ``[timestamp][group]: name=value``."""

    def emit(self, metric_data: MetricData) -> None:
        """Print one value.

        Args:
            metric_data: the value.
        """
        print(f"[{metric_data.timestamp}][{metric_data.group_name}]: "
              f"{metric_data.name}={metric_data.value}")


class NullMetricHandler(MetricHandler):
    """Drop every value (the default)."""

    def emit(self, metric_data: MetricData) -> None:
        """Drop one value.

        Args:
            metric_data: the value.
        """


class MetricStream:
    """The values of one group, sent to its handler.

    Args:
        group_name: the group.
        handler: its handler.
    """

    def __init__(self, group_name: str, handler: MetricHandler) -> None:
        self.group_name, self.handler = group_name, handler

    def add_value(self, metric_name: str, metric_value: int) -> None:
        """Send one value.

        Args:
            metric_name: the name.
            metric_value: the value.
        """
        self.handler.emit(MetricData(time.time(), self.group_name, metric_name, metric_value))


_default_handler: MetricHandler = NullMetricHandler()
_handlers: dict[str, MetricHandler] = {}


def configure(handler: MetricHandler, group: str | None = None) -> None:
    """Send the values of ``group`` (every group without its own, when None) to ``handler``.

    Args:
        handler: the handler.
        group: the group.
    """
    global _default_handler
    if group is None:
        _default_handler = handler
    else:
        _handlers[group] = handler


def getStream(group: str) -> MetricStream:
    """The stream of ``group``.

    Args:
        group: the group.
    """
    return MetricStream(group, _handlers.get(group, _default_handler))


def put_metric(metric_name: str, metric_value: int, metric_group: str = "torchelastic") -> None:
    """Publish one value.

    Args:
        metric_name: the name.
        metric_value: the value.
        metric_group: the group.
    """
    getStream(metric_group).add_value(metric_name, metric_value)


__all__ = ["ConsoleMetricHandler", "MetricData", "MetricHandler", "MetricStream",
           "NullMetricHandler", "configure", "getStream", "put_metric"]
