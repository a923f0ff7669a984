"""``VerificationError``: a converted file, an inputs file or a run that cannot be verified."""

from __future__ import annotations

from ..serde.errors import Pt2Error

__all__ = ["VerificationError"]


class VerificationError(Pt2Error):
    """The converted file cannot be read or run, the inputs do not fit the program, or the
    reference cannot be computed; the message names the file, input or output and the field."""
