"""The ExecuTorch kernels pt2x calls, from the generated table (``_kernel_table.py``, by
``scripts/gen_pte_kernels.py``: the portable kernel library of executorch 1.5.1 and the
primitive operators its runtime registers, with ATen's schemas).

``kernel("add.out")`` -> ``Kernel``: the ``aten::add`` / ``out`` operator a ``KernelCall``
names, its inputs (schema order, defaults) and its ``out`` tensors. A name the table lacks is
refused (``Unsupported``): pt2x never writes an operator the runtime has no kernel for.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..errors import Unsupported
from ._kernel_table import EXECUTORCH_PRIM, EXECUTORCH_VERSION, NO_DEFAULT, PORTABLE, PRIM

__all__ = ["Kernel", "KernelArg", "kernel", "out_variant", "NO_DEFAULT", "EXECUTORCH_VERSION"]


@dataclass(frozen=True)
class KernelArg:
    name: str
    type: str  # ATen's type as torch prints it: Tensor, Optional[Tensor], List[int], number, ...
    default: object  # NO_DEFAULT when the schema has none
    is_out: bool


@dataclass(frozen=True)
class Kernel:
    name: str  # aten::add
    overload: str  # out
    inputs: tuple  # of KernelArg, schema order (keyword-only ones included)
    outs: tuple  # of KernelArg: the tensors the kernel writes, in order

    def arg(self, name: str) -> KernelArg:
        for a in self.inputs:
            if a.name == name:
                return a
        raise KeyError(name)


@lru_cache(maxsize=None)
def kernel(key: str) -> Kernel:
    """``key`` (``op.overload`` in the ATen namespace, or ``executorch_prim::op.overload``) as a
    ``Kernel``; ``Unsupported`` when executorch's portable library and prim ops have none."""
    namespace, _, bare = key.rpartition("::")
    namespace = namespace or "aten"
    args = (PORTABLE.get(bare) or PRIM.get(bare)) if namespace == "aten" else \
        EXECUTORCH_PRIM.get(bare) if namespace == "executorch_prim" else PORTABLE.get(key)
    if args is None:
        raise Unsupported(f"ExecuTorch {EXECUTORCH_VERSION}'s portable kernels have no {namespace}::{bare}")
    op, _, overload = bare.partition(".")  # an in-place kernel (copy_) has no overload name
    parsed = [KernelArg(n, t, dflt, out) for n, t, dflt, _kw, out in args]
    return Kernel(f"{namespace}::{op}", overload, tuple(a for a in parsed if not a.is_out),
                  tuple(a for a in parsed if a.is_out))


def out_variant(op: str, overload: str) -> str | None:
    """The portable kernel an ATen overload's out variant would be (``cumsum.default`` ->
    ``cumsum.out``, ``add.Scalar`` -> ``add.Scalar_out``), or None when the library has none."""
    for key in ((f"{op}.out",) if overload == "default" else (f"{op}.{overload}_out", f"{op}.out")):
        if key in PORTABLE:
            return key
    return None
