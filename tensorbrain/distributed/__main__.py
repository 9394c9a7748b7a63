"""``python -m tensorbrain.distributed`` is ``tbrun`` (see tensorbrain.distributed.run)."""
import sys

from .run import main

sys.exit(main())
