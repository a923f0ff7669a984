"""Unpooling (``max_unpool2d``/``max_unpool3d``): values scattered back to the positions the
pool's indices name."""

from __future__ import annotations
