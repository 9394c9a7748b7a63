"""Averaging parameters over a process group (torch's ``model_averaging.utils``).

One flat buffer per dtype is all-reduced (not one collective per parameter), then copied back.

>>> import numpy as np
>>> a, b = np.ones(3, np.float32), np.full((2, 2), 3.0, np.float32)
>>> average_arrays([a, b], lambda flat: True)   # a world of one: nothing changes
True
>>> a.tolist(), b.tolist()
([1.0, 1.0, 1.0], [[3.0, 3.0], [3.0, 3.0]])
"""
from __future__ import annotations


def average_arrays(arrays: list, average) -> bool:
    """Average ``arrays`` (NumPy or CuPy) in place through ``average(flat_tensor) -> bool``,
    which averages one flat Tensor in place and says whether it succeeded.

    Args:
        arrays: the arrays (several dtypes allowed: one flat buffer each).
        average: the averaging function.

    Returns:
        bool: whether every flat buffer was averaged (the arrays are unchanged where not).
    """
    from .... import _xp
    from ...._factories import tensor
    by_dtype: dict = {}
    for a in arrays:
        by_dtype.setdefault(a.dtype, []).append(a)
    ok = True
    for group in by_dtype.values():
        xp = _xp.get_array_module(group[0])
        flat = tensor(xp.concatenate([a.reshape(-1) for a in group]))
        if not average(flat):
            ok = False
            continue
        data, at = flat._data, 0
        for a in group:
            a[...] = data[at:at + a.size].reshape(a.shape)
            at += a.size
    return ok


def average_parameters(params, process_group=None) -> None:
    """Average ``params`` (tensors) over ``process_group`` in place (torch's name).

    Args:
        params: an iterable of parameters (tensors).
        process_group: the group (None: the default group).
    """
    from ... import distributed_c10d as c10d

    def average(flat) -> bool:
        c10d.all_reduce(flat, group=process_group)
        flat._data *= 1.0 / c10d.get_world_size(process_group)
        return True
    average_arrays([p._data for p in params], average)


def average_parameters_or_parameter_groups(params, process_group=None) -> None:
    """:func:`average_parameters` of parameters, or of the parameters of param groups (dicts
    with ``"params"``), as torch's.

    Args:
        params: parameters, or an optimizer's ``param_groups``.
        process_group: the group (None: the default group).
    """
    params = list(params)
    if params and isinstance(params[0], dict):
        params = [p for g in params for p in g["params"]]
    average_parameters(params, process_group)
