"""Uneven inputs without a hang: ``Join``, ``Joinable`` and ``JoinHook``, as torch's
``torch.distributed.algorithms.join``.

Without it, a rank that runs out of batches leaves its loop while the others wait forever in
their next collective (pytorch/pytorch#38174). Inside ``with Join([model, ...]):`` a rank that is
done *shadows* the collectives the others still issue, until every rank is done:

* every active rank calls :meth:`Join.notify_join_context` at the start of each iteration's
  collectives: one all_reduce (SUM) of a 1 into a count;
* a rank whose loop has ended runs :meth:`Join.__exit__`'s loop: it all_reduces a 0 into the
  same count, and while the count says some ranks are still active it calls each joinable's
  :meth:`JoinHook.main_hook`, which mirrors that joinable's collectives of one iteration;
* when the count is 0 every rank runs each :meth:`JoinHook.post_hook` (``is_last_joiner`` is
  True on the ranks that never had to shadow) and leaves.

With ``throw_on_early_termination=True`` every rank raises instead, as soon as one has run out.
``DistributedDataParallel`` is a :class:`Joinable`; ``model.join()`` is ``Join([model])``.

Differences from torch: :meth:`Join.notify_join_context` waits for its all_reduce and returns
the number of ranks still active (torch returns the unfinished ``Work``); the throw needs no
second all_reduce, since that count already tells every rank. A joinable's config is reset when
the context exits, so a forward after it issues no join collective.
"""
from __future__ import annotations

import abc
from typing import Any, NamedTuple

from ..._dtype import int64
from ...tensor import full
from .. import distributed_c10d as _c10d

__all__ = ["Join", "JoinHook", "Joinable"]


class JoinHook:
    """What one joinable does while its rank has joined: override either method (both default
    to doing nothing), as torch's ``JoinHook``."""

    def main_hook(self) -> None:
        """Mirror the collectives of one iteration of the ranks still training."""

    def post_hook(self, is_last_joiner: bool) -> None:
        """Run once every rank has joined (e.g. bring the ranks' models back into agreement).

        Args:
            is_last_joiner: True on the ranks that never ran :meth:`main_hook` (the last to
                run out of inputs).
        """


class _JoinConfig(NamedTuple):
    enable: bool
    throw_on_early_termination: bool
    is_first_joinable: bool

    @staticmethod
    def construct_disabled_join_config() -> _JoinConfig:
        return _JoinConfig(enable=False, throw_on_early_termination=False, is_first_joinable=False)


class Joinable(abc.ABC):
    """A class whose collectives :class:`Join` can shadow, as torch's ``Joinable``.

    A subclass calls ``Joinable.__init__(self)``, calls :meth:`Join.notify_join_context` before
    each iteration's collectives, and implements :meth:`join_hook`, :attr:`join_device` and
    :attr:`join_process_group`.
    """

    @abc.abstractmethod
    def __init__(self):
        self._join_config = _JoinConfig.construct_disabled_join_config()

    @abc.abstractmethod
    def join_hook(self, **kwargs) -> JoinHook:
        """The hook that shadows this joinable's collectives once its rank has joined.

        Args:
            **kwargs: the keyword arguments given to :class:`Join`.
        """

    @property
    @abc.abstractmethod
    def join_device(self):
        """The device of the join context's own collective (that of this joinable's)."""

    @property
    @abc.abstractmethod
    def join_process_group(self) -> Any:
        """The process group of this joinable's collectives (None: the default group)."""


class Join:
    """Context manager that lets ranks with fewer inputs shadow the others' collectives.

    Args:
        joinables: the :class:`Joinable` objects used in the loop (one or more, one process
            group); the first one issues the per-iteration notification.
        enable: False makes the context do nothing (the same loop runs with even inputs).
        throw_on_early_termination: raise on every rank as soon as one runs out of inputs,
            instead of shadowing.
        **kwargs: passed to each joinable's :meth:`Joinable.join_hook` (e.g. DDP's
            ``divide_by_initial_world_size``).

    Raises:
        ValueError: ``joinables`` is empty, or they use different process groups.
        RuntimeError: a joinable is already inside another join context; with
            ``throw_on_early_termination=True``, a rank ran out of inputs.

    Example:
        >>> with Join([ddp_model]):                                   # doctest: +SKIP
        ...     for x in my_batches:      # fewer batches on some ranks
        ...         ddp_model(x).sum().backward()
    """

    def __init__(self, joinables: list[Joinable], enable: bool = True,
                 throw_on_early_termination: bool = False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = list(joinables)
        self._enable = bool(enable)
        self._throw_on_early_termination = bool(throw_on_early_termination)
        groups = {id(j.join_process_group) for j in self._joinables}
        if len(groups) > 1:
            raise ValueError("Using join context manager with multiple process groups is not "
                             "supported: give Join joinables of one process group")
        for j in self._joinables:
            if j._join_config.enable:
                raise RuntimeError(f"{type(j).__name__} is already inside a join context: join "
                                   f"contexts cannot be nested")
        self._join_hooks = [j.join_hook(**kwargs) for j in self._joinables]
        self._process_group = self._joinables[0].join_process_group
        self._device = self._joinables[0].join_device
        self._set_joinable_configs(self._enable)

    def _set_joinable_configs(self, enable: bool) -> None:
        for i, j in enumerate(self._joinables):
            j._join_config = _JoinConfig(enable=enable,
                                         throw_on_early_termination=self._throw_on_early_termination,
                                         is_first_joinable=i == 0)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if not self._enable or exc_type is not None:
                return False   # the loop's own error; peers will time out on their collectives
            is_last_joiner = True
            while (active := self._count_active(active=False)) > 0:
                if self._throw_on_early_termination:
                    group = self._process_group
                    raise _early_termination(active, _c10d.get_world_size(group),
                                             _c10d.get_rank(group))
                for hook in self._join_hooks:
                    hook.main_hook()
                is_last_joiner = False
            for hook in self._join_hooks:
                hook.post_hook(is_last_joiner)
            return False
        finally:
            self._set_joinable_configs(False)

    def _count_active(self, active: bool) -> int:
        return _count(active, self._device, self._process_group)

    @staticmethod
    def notify_join_context(joinable: Joinable) -> int | None:
        """Tell the ranks that have joined that this one still trains; call it at the start of
        each iteration's collectives.

        Only the first joinable of an enabled context communicates (one all_reduce).

        Args:
            joinable: the calling joinable.

        Returns:
            The number of ranks still active, or None when this joinable does not notify.

        Raises:
            RuntimeError: ``throw_on_early_termination=True`` and a rank has run out of inputs.
        """
        config = joinable._join_config
        if not (config.enable and config.is_first_joinable):
            return None
        group = joinable.join_process_group
        active = _count(True, joinable.join_device, group)
        world = _c10d.get_world_size(group)
        if config.throw_on_early_termination and active < world:
            raise _early_termination(active, world, _c10d.get_rank(group))
        return active


def _count(active: bool, device, group) -> int:
    """All-reduce (SUM) this rank's 1 (active) or 0 (joined): the number of active ranks."""
    t = full((1,), 1 if active else 0, dtype=int64, device=device)
    _c10d.all_reduce(t, group=group)
    return int(t.item())


def _early_termination(active: int, world: int, rank: int) -> RuntimeError:
    return RuntimeError(
        f"Join(throw_on_early_termination=True): detected at least one rank that exhausted its "
        f"inputs ({world - active} of {world} ranks have joined; this is rank {rank}). "
        f"Throwing across all ranks.")
