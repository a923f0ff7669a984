"""``python -m pt2x``: the ``pt2x`` command line (``pt2x.tools.cli``)."""

import sys

from .tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
