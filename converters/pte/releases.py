"""The ExecuTorch runtime releases ``pt2x validate FILE.pte --target executorch==X.Y`` knows, as data.

A release is what its runtime checks when it loads a program: the flatbuffer's file identifier,
the extended header's magic, the highest ``Program.version`` it reads
(``Program::kMaxSupportedSchemaVersion``, which exir stamps as ``EXECUTORCH_SCHEMA_VERSION``),
the highest ``FlatTensor.version`` of a ``.ptd`` it reads (``FlatTensorDataMap::kMaxSupportedSchemaVersion``),
and the operators it has kernels for: the portable kernel library (``_kernel_table.py``,
generated from that release's ``functions.yaml``) and the primitive operators its runtime
registers itself (``runtime/kernel/prim_ops``, listed below as its ``portable_lib`` reports them).
A new release is one more entry in ``RELEASES``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...serde.errors import Pt2UsageError
from ._kernel_table import EXECUTORCH_PRIM, PORTABLE, PRIM

__all__ = ["Release", "RELEASES", "release", "kernel_key", "missing_kernels"]

# executorch 1.5.1's prim ops (its runtime registers these beside the kernel library)
_PRIM_OPS_1_5 = (
    "aten::_local_scalar_dense", "aten::sym_numel", "aten::sym_size.int",
    "executorch_prim::add.Scalar", "executorch_prim::ceil.Scalar", "executorch_prim::eq.Scalar",
    "executorch_prim::et_copy_index.tensor", "executorch_prim::et_view.default",
    "executorch_prim::floordiv.Scalar", "executorch_prim::floordiv.int", "executorch_prim::ge.Scalar",
    "executorch_prim::gt.Scalar", "executorch_prim::le.Scalar", "executorch_prim::lt.Scalar",
    "executorch_prim::mod.Scalar", "executorch_prim::mod.int", "executorch_prim::mul.Scalar",
    "executorch_prim::neg.Scalar", "executorch_prim::round.Scalar", "executorch_prim::sub.Scalar",
    "executorch_prim::sym_float.Scalar", "executorch_prim::sym_int.Scalar", "executorch_prim::sym_ite.Scalar",
    "executorch_prim::sym_max.Scalar", "executorch_prim::sym_min.Scalar", "executorch_prim::sym_not.Scalar",
    "executorch_prim::truediv.Scalar", "executorch_prim::trunc.Scalar",
)


def _qualified(key: str, namespace: str = "aten") -> str:
    return key if "::" in key else f"{namespace}::{key}"


@dataclass(frozen=True)
class Release:
    name: str  # "1.5"
    version: str  # the release the facts were taken from, "1.5.1"
    file_identifier: bytes
    header_magic: bytes
    max_schema_version: int
    max_data_version: int  # of a .ptd (FlatTensor)
    kernels: frozenset  # "aten::add.out", "dim_order_ops::_clone_dim_order.out", "executorch_prim::mul.Scalar"


RELEASES = {
    "1.5": Release(
        "1.5", "1.5.1", b"ET12", b"eh00", 0, 0,
        frozenset([_qualified(k) for k in PORTABLE] + [_qualified(k) for k in PRIM]
                  + [_qualified(k, "executorch_prim") for k in EXECUTORCH_PRIM] + list(_PRIM_OPS_1_5))),
}


def release(target: str) -> Release:
    """``executorch==1.5`` (or ``executorch==1.5.1``, ``1.5``) -> its ``Release``; anything else a
    ``Pt2UsageError`` naming the known releases."""
    text = str(target).strip()
    bare = text[len("executorch=="):] if text.startswith("executorch==") else text
    parts = bare.split(".")
    known = ", ".join(f"executorch=={r}" for r in RELEASES)
    if len(parts) in (2, 3) and all(p.isdigit() for p in parts):
        r = RELEASES.get(".".join(parts[:2]))
        if r is not None:
            return r
    raise Pt2UsageError(f"target {text!r}: not a known ExecuTorch release; known releases: {known}")


def kernel_key(name: str, overload: str) -> str:
    """An ``Operator``'s name and overload as the runtime looks it up: ``aten::add`` + ``out``
    -> ``aten::add.out``; an empty overload adds nothing (``aten::sym_numel``)."""
    return f"{name}.{overload}" if overload else name


def missing_kernels(rel: Release, keys) -> list[str]:
    """The operator keys ``rel``'s runtime has no kernel for, in the order given, once each."""
    out = []
    for k in keys:
        if k not in rel.kernels and k not in out:
            out.append(k)
    return out
