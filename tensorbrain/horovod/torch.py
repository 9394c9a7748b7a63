"""``horovod.torch``'s path: the same names as :mod:`tensorbrain.horovod`."""
from . import *  # noqa: F401,F403
from . import __all__  # noqa: F401
