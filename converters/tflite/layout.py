"""The layout pass (NCHW programs, NHWC kernels): placeholder until the pass lands."""

from __future__ import annotations

from .model import Subgraph

__all__ = ["optimize_layout"]


def optimize_layout(sub: Subgraph, *, nhwc_io: bool = False) -> None:
    if nhwc_io:
        from ..errors import ConversionError

        raise ConversionError("nhwc_io=True needs the layout pass, which this pt2x version does not have yet")
