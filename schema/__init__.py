"""pt2x.schema: torch.export's serialization schema (8.x) as typed Python definitions.

``definitions`` holds every struct, union and enum; ``version`` says what pt2x writes
and reads. Everything else (codec, snapshots, validators) is derived from these.
"""

from . import definitions
from .definitions import *  # noqa: F401,F403
from .kinds import SchemaEnum, Union, is_struct, is_union, type_hints
from .version import SCHEMA_VERSION, READ_MAJOR, TREESPEC_VERSION

SCHEMA_TYPES: dict[str, type] = {
    name: obj
    for name, obj in vars(definitions).items()
    if isinstance(obj, type) and getattr(obj, "__module__", None) == definitions.__name__
}
"""Every schema type by name, in declaration order."""
