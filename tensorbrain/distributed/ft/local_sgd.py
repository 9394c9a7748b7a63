"""Training over slow links: ``LocalSGD`` and ``DiLoCo`` (torchft's names), with or without a
:class:`Manager`.

Both wrap the (inner) optimizer: each replica takes ``sync_every`` local steps, then the
replicas communicate once.

* ``LocalSGD`` averages the parameters (Lin et al., "Don't use large mini-batches, use local
  SGD", 2018; torch's ``PostLocalSGDOptimizer`` after its warm-up).
* ``DiLoCo`` (Douillard et al., 2023, arXiv:2311.08105) averages the *pseudo-gradients*, the
  parameters at the last sync minus the parameters now, puts the parameters back to the last
  sync, and lets an outer optimizer step with the averaged pseudo-gradient as the gradient: the
  paper's outer optimizer is SGD with Nesterov momentum (lr 0.7, momentum 0.9), its inner one
  AdamW.

Without a manager they average over ``process_group`` (default: the default group; on a 2-D
mesh, pass the replicate dimension's group). With a manager the sync is the manager's step: a
round of the quorum first when needed (a replacement receives the parameters of the last sync
and the optimizers' states), the average over the live replicas, and the commit vote: when a
replica died during the sync, nobody applies it; the parameters go back to the last sync and
the window is repeated by the survivors.

Communication per ``sync_every`` steps: one all_reduce of every parameter (float32: 4 bytes per
parameter), against DDP's one per step: ``sync_every`` times less (measured in
``benchmarks/diloco.py`` over a shaped 100 Mbit/s, 20 ms link; docs/fault_tolerance.md).
"""
from __future__ import annotations

import numpy as np


class _Periodic:
    """Counts local steps; ``zero_grad`` starts the manager's step at a window's start."""

    def __init__(self, model, optimizer, sync_every: int, manager=None, process_group=None):
        if int(sync_every) < 1:
            raise ValueError(f"sync_every must be >= 1, got {sync_every}")
        if manager is not None and process_group is not None:
            raise ValueError("pass a manager or a process_group, not both")
        self.model, self.optimizer = model, optimizer
        self.sync_every = int(sync_every)
        self.manager, self.process_group = manager, process_group
        self.local_step = 0   # local steps since the last sync
        self.syncs = 0        # syncs applied

    @property
    def params(self) -> list:
        """The model's parameters, in order."""
        return [p for p in self.model.parameters()]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients; at a window's start, begin the manager's step first.

        Args:
            set_to_none: as the optimizer's.
        """
        if self.manager is not None and self.local_step == 0:
            self.manager.start_step()
            self._window_start()
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        """The optimizer's step; every ``sync_every``-th also syncs the replicas.

        Args:
            closure: passed to the optimizer.

        Returns:
            The optimizer's return value.
        """
        out = self.optimizer.step(closure) if closure is not None else self.optimizer.step()
        self.local_step += 1
        if self.local_step >= self.sync_every:
            self.local_step = 0
            self.sync()
        return out

    def _window_start(self) -> None:
        """Hook: the manager may have replaced the parameters (a recovered replica)."""

    def sync(self) -> bool:
        """Communicate now (see the subclasses). Returns whether the sync was applied."""
        raise NotImplementedError

    # ***** averaging, through the manager or a process group *****
    def _average(self, arrays: list) -> bool:
        """Average ``arrays`` over the replicas in place; False when a replica failed (with a
        manager: the arrays may then hold anything)."""
        from ..algorithms.model_averaging.utils import average_arrays
        if self.manager is None:
            from .. import distributed_c10d as c10d
            group = self.process_group

            def average(flat) -> bool:
                c10d.all_reduce(flat, group=group)
                flat._data *= 1.0 / c10d.get_world_size(group)
                return True
            return average_arrays(arrays, average)
        mgr = self.manager
        return average_arrays(arrays, lambda flat: mgr.allreduce(flat).wait() is not None
                              and not mgr.step_failed())

    def _commit(self, ok: bool) -> bool:
        if self.manager is None:
            return ok
        return self.manager.should_commit() and ok

    def state_dict(self) -> dict:
        """The wrapper's counters (the optimizers' states are theirs)."""
        return {"local_step": self.local_step, "syncs": self.syncs}

    def load_state_dict(self, state: dict) -> None:
        """Restore the counters.

        Args:
            state: as ``state_dict()`` returned it.
        """
        self.local_step, self.syncs = int(state["local_step"]), int(state["syncs"])


class LocalSGD(_Periodic):
    """Local SGD: ``sync_every`` local optimizer steps, then the parameters are averaged.

    Args:
        model: the model (each replica holds all of it).
        optimizer: its optimizer.
        sync_every: local steps between two averages.
        manager: a :class:`Manager` (live recovery), or None.
        process_group: the group to average over without a manager (None: the default group).

    Example::

        opt = ft.LocalSGD(model, tb.optim.SGD(model.parameters(), lr=0.1), sync_every=8)
        for x, y in loader:
            opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
    """

    def __init__(self, model, optimizer, sync_every: int, manager=None, process_group=None):
        super().__init__(model, optimizer, sync_every, manager, process_group)
        self._backup: list | None = None

    def _window_start(self) -> None:
        self._backup = [p._data.copy() for p in self.params]

    def sync(self) -> bool:
        """Average the parameters over the replicas (with a manager: roll back to the window's
        start if a replica failed).

        Returns:
            bool: whether the average was applied.
        """
        params = self.params
        ok = self._commit(self._average([p._data for p in params]))
        if ok:
            self.syncs += 1
        elif self._backup is not None:
            for p, b in zip(params, self._backup):
                p._data[...] = b
        return ok


class DiLoCo(_Periodic):
    """DiLoCo: ``sync_every`` inner steps, then an outer step on the averaged pseudo-gradient.

    Args:
        model: the model.
        inner_optimizer: the local optimizer (the paper: AdamW).
        outer_optimizer: over the same parameters (the paper: ``SGD(lr=0.7, momentum=0.9,
            nesterov=True)``).
        sync_every: inner steps between two outer steps (the paper's H: 500; 50 here).
        manager: a :class:`Manager` (live recovery), or None.
        process_group: the group to average over without a manager (None: the default group).

    Raises:
        ValueError: the outer optimizer does not hold exactly the model's parameters.
    """

    def __init__(self, model, inner_optimizer, outer_optimizer, sync_every: int, manager=None,
                 process_group=None):
        super().__init__(model, inner_optimizer, sync_every, manager, process_group)
        self.outer_optimizer = outer_optimizer
        outer = [id(p) for g in outer_optimizer.param_groups for p in g["params"]]
        if sorted(outer) != sorted(id(p) for p in self.params):
            raise ValueError("DiLoCo: the outer optimizer must hold exactly the model's "
                             f"parameters ({len(self.params)}); it holds {len(outer)}")
        self._original = [p._data.copy() for p in self.params]

    def _window_start(self) -> None:
        # a recovered replica received the parameters of the last sync: they are the origin
        self._original = [p._data.copy() for p in self.params]

    def sync(self) -> bool:
        """The outer step: average ``original - current`` over the replicas, reset the
        parameters to ``original`` and step the outer optimizer with that as the gradient.

        Returns:
            bool: whether the outer step was applied (with a manager: every replica finished
            the sync; otherwise the window's inner steps are dropped and it starts again).
        """
        from ..._tensor_base import TensorBase as Tensor
        params = self.params
        pseudo = [o - p._data for o, p in zip(self._original, params)]
        ok = self._commit(self._average(pseudo))
        for p, o in zip(params, self._original):
            p._data[...] = o
        if not ok:
            return False
        for p, g in zip(params, pseudo):
            p.grad = Tensor._wrap(np.ascontiguousarray(g) if isinstance(g, np.ndarray) else g)
        self.outer_optimizer.step()
        self.outer_optimizer.zero_grad(set_to_none=True)
        self._original = [p._data.copy() for p in params]
        self.syncs += 1
        return True
