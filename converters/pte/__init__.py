"""pt2x.converters.pte: ATen programs -> ExecuTorch ``.pte`` files, torch-free.

docs/pte.md: programs of the ATen ops it lists (float, integer and bool tensors, PT2E int8, state,
``cond``), each lowered to ExecuTorch's
portable out-variant kernels (``kernels.py``, from the generated ``_kernel_table.py``), memory
planned into one arena (``memory_plan.py``), weights streamed into the constant segment
(``writer.py``, with flatc's ``schema_generated.py`` of ExecuTorch's ``program.fbs``) or a ``.ptd``.

Modules, in the order data flows: ``converter`` (``to_pte``: the phases) -> ``ops_*`` (one
lowering per ATen overload, registered as backend ``"pte"``; ``shapes`` and ``symbols`` are their
views and shape-symbol arithmetic), ``control_flow`` (``cond`` as jumps and moves around its
branches) and ``state`` (mutable buffers) -> ``context`` (the driver's target and the verbs
lowerings use) -> ``kernels`` -> ``program`` (the plan: values and the chain's instructions)
-> ``memory_plan`` -> ``constants`` (byte-identical weights share a buffer) -> ``writer`` (the
``.pte``) and ``ptd`` (``external_weights=True``: the ``.ptd`` FlatTensor file beside it, with
flatc's ``flat_tensor_generated.py``), both streaming weights through ``segments``.

Reading files back, torch-free: ``reader`` (a ``.pte``), ``ptd_reader`` (a ``.ptd``, and what a
``.pte`` needs of it), ``releases`` (what each ExecuTorch runtime loads). ``debug_outputs``: a
``.pte``'s copy with its intermediate values as outputs, for ``pt2x verify --locate``.
"""

from __future__ import annotations

__all__ = ["to_pte"]


def __getattr__(name: str):
    if name == "to_pte":
        from .converter import to_pte

        return to_pte
    raise AttributeError(name)
