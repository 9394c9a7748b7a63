"""``tb._dynamo.config``: torch's dynamo settings, stored and without effect (nothing compiles).

Reading or setting a name torch's config does not have is an AttributeError, as torch's;
``config.patch(name=value)`` sets values for a block (a context manager and decorator).
"""
from __future__ import annotations

import contextlib

#: torch's settings that programs set, with torch's defaults.
DEFAULTS = {
    "suppress_errors": False, "cache_size_limit": 8, "recompile_limit": 8,
    "accumulated_cache_size_limit": 256, "accumulated_recompile_limit": 256,
    "capture_scalar_outputs": False, "capture_dynamic_output_shape_ops": False,
    "automatic_dynamic_shapes": True, "assume_static_by_default": True,
    "optimize_ddp": True, "verbose": False, "disable": False,
    "error_on_nested_fx_trace": True, "skip_fwd_side_effects_in_bwd_under_checkpoint": False,
    "inline_inbuilt_nn_modules": True, "allow_unspec_int_on_nn_module": False,
    "force_parameter_static_shapes": True, "specialize_int": False,
    "compiled_autograd": False, "guard_nn_modules": False, "log_compilation_metrics": True,
    "raise_on_ctx_manager_usage": True, "dynamic_shapes": True, "cache_size_limit_hits": 0,
}


class _Config:
    """A settings object (``tb._dynamo.config``; ``tb.distributed.config`` keeps its values in
    the module's globals).

    Args:
        name: torch's name, for errors.
        defaults: the settings and their defaults.
        values: where the values live (a new dict of the defaults when None).
    """

    def __init__(self, name: str = "torch._dynamo.config", defaults: dict | None = None,
                 values: dict | None = None):
        defaults = DEFAULTS if defaults is None else defaults
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_names", frozenset(defaults))
        object.__setattr__(self, "_values", dict(defaults) if values is None else values)

    def __getattr__(self, name):
        if name in object.__getattribute__(self, "_names"):
            return object.__getattribute__(self, "_values")[name]
        raise AttributeError(f"{object.__getattribute__(self, '_name')} has no setting {name!r}")

    def __setattr__(self, name, value):
        if name not in self._names:
            raise AttributeError(f"{self._name} has no setting {name!r}")
        self._values[name] = value

    def patch(self, arg=None, **changes):
        """Set settings for a block: ``with config.patch(suppress_errors=True):`` or as a
        decorator; ``patch({"name": value})`` works too.

        Args:
            arg: a dict of changes, or None.
            **changes: name=value pairs.

        Raises:
            AttributeError: an unknown name.
        """
        changes = {**(arg or {}), **changes}
        for name in changes:
            getattr(self, name)   # unknown names fail at once
        cfg = self

        class _Patch(contextlib.ContextDecorator):
            def __enter__(self):
                self.old = {k: cfg._values[k] for k in changes}
                cfg._values.update(changes)
                return self

            def __exit__(self, *exc):
                cfg._values.update(self.old)
                return False
        return _Patch()

    def __dir__(self):
        return sorted(self._names) + ["patch"]


config = _Config()

