"""Testing helpers: gradient checks against finite differences (and torch when installed), and a
harness that runs a function in N real processes for distributed tests."""

from .gradcheck import GradcheckError, gradcheck, torch_available  # noqa: E402,F401
