"""Testing helpers: torch's ``assert_close`` / ``assert_allclose`` / ``make_tensor``
(``_comparison.py``), gradient checks against finite differences (and torch when installed),
a harness that runs a function in N real processes for distributed tests, and the torch
surface inventory (``api_coverage``)."""

from .gradcheck import GradcheckError, gradcheck, torch_available  # noqa: E402,F401
from ._comparison import assert_allclose, assert_close, make_tensor  # noqa: E402,F401
from .._unsupported import unsupported_class as _refused  # noqa: E402

FileCheck = _refused("torch.testing.FileCheck", "it checks TorchScript IR, which TensorBrain "
                     "does not have")
