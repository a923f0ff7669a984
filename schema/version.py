"""Which schema version pt2x writes, and which it reads.

A file's ``schema_version`` must have this major. Any minor is read: minors newer than
ours may carry fields we don't know; those are kept and reported, not dropped.
"""

SCHEMA_VERSION: tuple[int, int] = (8, 20)
"""What pt2x writes (torch 2.13-2.14 write 8.20)."""

READ_MAJOR: int = 8
"""The only major read directly (8.0 is torch 2.5's successor; 7.x needs an upgrade)."""

OLDEST_MINOR_READ: int = 0

TREESPEC_VERSION: int = 1
"""Version of torch's pytree spec JSON inside ``in_spec`` / ``out_spec``."""
