"""``python -m thinkj.gpu_kit COMMAND``: see :mod:`thinkj.gpu_kit`."""

import sys

from thinkj.gpu_kit.cli import main

sys.exit(main())
