"""``python -m pt2x.tools``: the ``pt2x`` command line, as ``python -m pt2x``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
