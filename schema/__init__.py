"""pt2x.schema: torch.export's serialization schema (8.x) as typed Python definitions.

``definitions`` holds every struct, union and enum (built from ``kinds``); ``version`` says
what pt2x writes and reads; ``dtypes`` is the one ``ScalarType`` table; ``walk`` the one walk
over arguments, subgraphs and signature kinds; ``snapshot`` the canonical snapshot format
(``snapshots/``: this release's schema and torch releases') and ``diff`` the rules for
comparing two. Everything else (codec, validators, converters) is derived from these. Imports
no layer above it.
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
