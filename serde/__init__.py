"""pt2x.serde: .pt2 bytes <-> schema objects <-> torch.

Torch-free: ``load`` (zip -> checked models with numpy weights). Needs torch (imported on
first use, only under ``serde.torch``): ``save``, ``load_exported_program``, ``to_schema``,
``from_schema``. The names in ``__all__`` are the public API.

Inside: ``archive/`` (the zip reader and writer, the layouts of each torch release, tensor
data), ``codec/`` (JSON, symbolic expressions, the data-only unpickler, the 7.x upgrader),
``compat/`` (what a target release can read, and the one downgrade planner), ``torch/`` (the
bridge), ``validate`` (``pt2x validate``'s checks), ``code_bearing`` (what a torch release would
execute: it is never valid and never written), ``findings``, and ``errors`` and ``limits``,
which every layer above uses.
"""

from __future__ import annotations

from .archive.loader import NotLoaded, Pt2Archive, Pt2Model, load
from .errors import (
    ArchiveError,
    LimitExceededError,
    MissingExtraError,
    Pt2Error,
    Pt2FormatError,
    Pt2UsageError,
    SchemaError,
    SchemaVersionError,
    SymbolicExprError,
    TensorDataError,
    UnsafeContentError,
)

__all__ = [
    "load",
    "save",
    "load_exported_program",
    "to_schema",
    "from_schema",
    "Pt2Archive",
    "Pt2Model",
    "NotLoaded",
    "Pt2Error",
    "Pt2FormatError",
    "Pt2UsageError",
    "MissingExtraError",
    "ArchiveError",
    "LimitExceededError",
    "SchemaError",
    "SchemaVersionError",
    "SymbolicExprError",
    "TensorDataError",
    "UnsafeContentError",
]

_BRIDGE = ("save", "load_exported_program", "to_schema", "from_schema")


def __getattr__(name: str):
    # The torch bridge is imported on first use, so `import pt2x.serde` never imports torch.
    if name in _BRIDGE:
        from .torch import api as bridge

        return getattr(bridge, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
