"""pt2x.tools: the ``pt2x`` command line (``cli``) and the project's scripts."""
