"""``tb.distributed.launcher`` (``torch.distributed.launcher``): :func:`elastic_launch`,
torchrun from Python (what Accelerate's launchers call)."""
from .api import LaunchConfig, elastic_launch, launch_agent

__all__ = ["LaunchConfig", "elastic_launch", "launch_agent"]
