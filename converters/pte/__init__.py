"""pt2x.converters.pte: ATen programs -> ExecuTorch ``.pte`` files, torch-free.

Slice 1 (docs/pte.md): float32 programs of a core set of ATen ops, each lowered to one of ExecuTorch's
portable out-variant kernels (``kernels.py``, from the generated ``_kernel_table.py``), memory
planned into one arena (``memory_plan.py``), weights streamed into the constant segment
(``writer.py``, with flatc's ``schema_generated.py`` of ExecuTorch's ``program.fbs``).

Modules, in the order data flows: ``converter`` (``to_pte``: the phases) -> ``ops_*`` (one
lowering per ATen overload, registered as backend ``"pte"``; ``shapes`` and ``symbols`` are their
views and shape-symbol arithmetic) -> ``context`` (the driver's target and the verbs lowerings
use) -> ``kernels`` -> ``program`` (the plan: values and calls) -> ``memory_plan`` -> ``constants``
(byte-identical weights share a buffer) -> ``writer``.
"""

from __future__ import annotations

__all__ = ["to_pte"]


def __getattr__(name: str):
    if name == "to_pte":
        from .converter import to_pte

        return to_pte
    raise AttributeError(name)
