"""Lowerings that rearrange elements without computing new values: the ``atleast_*d`` family,
the stacks (``hstack``, ``vstack``, ``dstack``, ``column_stack``), flips and rotations, diagonals
and block matrices, channel and pixel shuffles, ``take`` and ``take_along_dim``."""

from __future__ import annotations
