"""``torch.nn.common_types``: the type aliases layer signatures use (``_size_2_t`` is an int or
a pair of ints...)."""
from __future__ import annotations

from typing import Optional, Union

from ..tensor import Tensor

_scalar_or_tuple_any_t = Union[int, tuple]   # noqa: UP007
_size_any_t = Union[int, tuple]   # noqa: UP007
_size_1_t = Union[int, tuple]   # noqa: UP007
_size_2_t = Union[int, tuple]   # noqa: UP007
_size_3_t = Union[int, tuple]   # noqa: UP007
_size_any_opt_t = Union[Optional[int], tuple]   # noqa: UP007,UP045
_size_2_opt_t = _size_any_opt_t
_size_3_opt_t = _size_any_opt_t
_ratio_2_t = Union[float, tuple]   # noqa: UP007
_ratio_3_t = Union[float, tuple]   # noqa: UP007
_ratio_any_t = Union[float, tuple]   # noqa: UP007
_tensor_list_t = Union[Tensor, tuple]   # noqa: UP007
_maybe_indices_t = Union[Tensor, tuple]   # noqa: UP007
