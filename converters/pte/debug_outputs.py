"""A copy of a ``.pte`` whose intermediate values are extra outputs: what ``pt2x verify --locate``
runs, since ExecuTorch's stock runtime keeps no intermediate value (its arena reuses each
tensor's bytes once the tensor is dead) and its file names none.

The values get their names, and their lifetimes, from the program itself: ``name_values`` lowers
the ``.pt2`` again (``plan_program``, the conversion that wrote the file, its dynamic dims bounded
as the file's inputs are) and checks that the file is that plan, value for value (kind, dtype,
sizes, planned or constant) and call for call. Then each value the plan names after a program
value and a call writes is made an output, and ``with_outputs`` writes the copy: the file's own
bytes (its instructions, operators, scalars, weights: a fault planted in any of them stays),
with three edits appended after its flatbuffer and pointed at, never written over:

* every planned tensor gets a new ``AllocationDetails``: the plan's memory planned again
  (``memory_plan.plan_memory``) with the extra outputs living to the end, so no value is
  overwritten before the run returns it (a view keeps sharing its base's bytes);
* ``ExecutionPlan.outputs``: the file's outputs, then the extra ones;
* ``non_const_buffer_sizes[1]``: the new arena's size (in place), and the extended header's
  program size and segment base offset; the segments follow, copied as they are.

A delegated file is planned and delegated again as ``to_pte`` did: the values a partition
computes inside its payload are not the runtime's to return, so its outputs are the values named.

Only a ``.pte`` pt2x wrote for the same program can be named so (another tool's file has other
values); ``name_values`` says why a file does not match.
"""

from __future__ import annotations

import os
import shutil
import struct
from dataclasses import dataclass

import flatbuffers
import numpy as np

from ...serde.codec.symbolic import Symbol
from ..errors import ConversionError
from . import schema_generated as fb
from .converter import plan_program
from .memory_plan import MEMORY_ID, plan_memory
from .program import Plan, TensorValue
from .reader import _PLAN_SLOT, _TENSOR_SLOT, _dtype_names
from .segments import align
from .writer import HEADER_MAGIC, SEGMENT_ALIGNMENT
from .xnnpack.delegate import delegate_to_xnnpack

__all__ = ["NamedValues", "name_values", "with_outputs"]

_KINDS = {"Null": fb.KernelTypes.Null, "Int": fb.KernelTypes.Int, "Bool": fb.KernelTypes.Bool,
          "Double": fb.KernelTypes.Double, "String": fb.KernelTypes.String, "IntList": fb.KernelTypes.IntList,
          "TensorList": fb.KernelTypes.TensorList}
_CHUNK_ALIGNMENT = 16  # where the appended tables start (more than any of their fields needs)


@dataclass
class NamedValues:
    """The plan a file was written from, and what its debug copy adds."""

    plan: Plan
    outputs: list  # the file's outputs (TensorValues)
    extra: list  # TensorValues made outputs, in run order
    order: list  # per instruction: (label, the file's operator, names read, names written)


def _head(data) -> tuple[int, int, int]:
    """(program size, segment base offset, segment data size) of a .pte with an extended header."""
    if bytes(data[8:12]) != HEADER_MAGIC:
        raise ConversionError("the .pte has no extended header: pt2x writes one, and names only its own files")
    return struct.unpack_from("<QQQ", data, 16)


def _bounds(view, program) -> dict[str, int]:
    """Each shape symbol's upper bound, as the file's inputs were planned (the symbol's input dim);
    a symbol no input carries as a whole dim: its range's."""
    inputs = [u.name for u in view.user_inputs if u.kind == "tensor"]
    plan_fb = program.ExecutionPlan(0)
    out = {}
    for name, (inp, axis) in view.symbol_sources().items():
        value = plan_fb.Values(plan_fb.Inputs(inputs.index(inp)))
        t = fb.Tensor()
        t.Init(value.Val().Bytes, value.Val().Pos)
        out[name] = int(t.Sizes(axis))
    for t in view.tensors.values():
        for s in t.shape:
            hi = view.ranges.get(s.name, (None, None))[1] if isinstance(s, Symbol) else None
            if hi is not None and s.name not in out:
                out[s.name] = hi
    return out


def _file_values(plan_fb) -> list[tuple]:
    out = []
    for i in range(plan_fb.ValuesLength()):
        ev = plan_fb.Values(i)
        if ev.ValType() != fb.KernelTypes.Tensor:
            out.append((ev.ValType(),))
            continue
        t = fb.Tensor()
        t.Init(ev.Val().Bytes, ev.Val().Pos)
        sizes = tuple(int(t.Sizes(j)) for j in range(t.SizesLength()))
        out.append((fb.KernelTypes.Tensor, t.ScalarType(), sizes, t.AllocationInfo() is not None))
    return out


def _plan_values(plan: Plan) -> list[tuple]:
    out = []
    for v in plan.values:
        if isinstance(v, TensorValue):
            out.append((fb.KernelTypes.Tensor, v.scalar_type, tuple(v.sizes), v.storage().weight is None))
        else:
            out.append((_KINDS[v.kind],))
    return out


def _described(value: tuple) -> str:
    """``(kind, ...)`` of ``_file_values``/``_plan_values`` in words: ``a planned FLOAT tensor [2, 8]``."""
    kind = next((k for k, v in vars(fb.KernelTypes).items() if v == value[0] and not k.startswith("_")), str(value[0]))
    if len(value) == 1:
        return f"a {kind}"
    dtype = _dtype_names(fb).get(value[1], str(value[1]))
    return f"a {'planned' if value[3] else 'constant'} {dtype} tensor {list(value[2])}"


def _mismatch(plan: Plan, plan_fb) -> str | None:
    """Why the file is not ``plan`` (None when it is)."""
    have, want = _file_values(plan_fb), _plan_values(plan)
    if len(have) != len(want):
        return f"it has {len(have)} values, pt2x's conversion of the program {len(want)}"
    for i, (h, w) in enumerate(zip(have, want)):
        if h != w:
            return f"value {i} is {_described(h)}, in pt2x's conversion of the program {_described(w)}"
    n = sum(plan_fb.Chains(k).InstructionsLength() for k in range(plan_fb.ChainsLength()))
    if plan_fb.ChainsLength() != 1 or n != len(plan.calls):
        return f"it has {n} instructions, pt2x's conversion of the program {len(plan.calls)}"
    ios = (list(plan_fb.InputsAsNumpy()) if plan_fb.InputsLength() else [],
           list(plan_fb.OutputsAsNumpy()) if plan_fb.OutputsLength() else [])
    if ios != ([v.index for v in plan.inputs], [v.index for v in plan.outputs]):
        return "its inputs and outputs are other values than pt2x's conversion of the program"
    return None


def _operators(plan_fb) -> list[str]:
    """Each instruction's operator as the file names it (``aten::relu.out``)."""
    ops = []
    for i in range(plan_fb.OperatorsLength()):
        op = plan_fb.Operators(i)
        name, overload = (op.Name() or b"").decode(), (op.Overload() or b"").decode()
        ops.append(f"{name}.{overload}" if overload else name)
    chain, out = plan_fb.Chains(0), []
    for j in range(chain.InstructionsLength()):
        ins = chain.Instructions(j)
        if ins.InstrArgsType() == fb.InstructionArguments.DelegateCall:
            call = fb.DelegateCall()
            call.Init(ins.InstrArgs().Bytes, ins.InstrArgs().Pos)
            out.append(f"{(plan_fb.Delegates(call.DelegateIndex()).Id() or b'').decode()} delegate")
            continue
        if ins.InstrArgsType() != fb.InstructionArguments.KernelCall:
            out.append("?")
            continue
        call = fb.KernelCall()
        call.Init(ins.InstrArgs().Bytes, ins.InstrArgs().Pos)
        out.append(ops[call.OpIndex()])
    return out


def name_values(view, data: bytes, names) -> tuple[NamedValues | None, str]:
    """The values of ``data`` (a ``.pte``'s flatbuffer, read by ``read_pte`` first) named after
    the program ``view``'s: its plan, and the values named in ``names`` (the reference's) that a
    call writes, to be made outputs; or None and why the file cannot be named."""
    if bytes(data[8:12]) != HEADER_MAGIC:
        return None, "the file has no extended header (pt2x writes one): it is not pt2x's"
    program = fb.Program.GetRootAs(data, 0)
    try:
        plan = plan_program(view, _bounds(view, program))
    except ConversionError as e:  # UnsupportedOpsError too: pt2x did not write this file
        return None, f"pt2x does not convert the program to a .pte as it stands ({str(e).splitlines()[0]})"
    except KeyError as e:  # a shape symbol with no bound: not a program pt2x converted
        return None, f"the program's shape symbol {e} has no bound the file shows"
    plan_fb = program.ExecutionPlan(0)
    if plan_fb.DelegatesLength():  # delegated as to_pte did: a partition's inner values are the delegate's
        delegate_to_xnnpack(plan, view)
    why = _mismatch(plan, plan_fb)
    if why is not None:
        return None, f"the file is not pt2x's conversion of the program: {why}"
    ops = _operators(plan_fb)
    outputs = set(map(id, plan.outputs))
    extra, seen, order = [], set(outputs), []
    for k, call in enumerate(plan.calls):
        written = [v for v in call.writes if v.name]
        order.append((f"#{k}", ops[k], [v.name for v in call.reads if v.name], [v.name for v in written]))
        for v in written:
            if v.name in names and id(v) not in seen:
                seen.add(id(v))
                extra.append(v)
    return NamedValues(plan, list(plan.outputs), extra, order), ""


# ------------------------------------------------------------------ the copy


def _appended(named: NamedValues, offsets: dict) -> tuple[bytes, dict, int]:
    """The tables and vector appended: one ``AllocationDetails`` per planned tensor (value index ->
    its position from the chunk's start), the outputs vector (its position), as flatbuffers lays
    them out (positions relative to the chunk: its offsets are relative and move with it)."""
    b = flatbuffers.Builder(1024)
    b.ForceDefaults(True)
    tables = {}
    for v, off in offsets.items():
        fb.AllocationDetailsStart(b)
        fb.AllocationDetailsAddMemoryId(b, MEMORY_ID)
        fb.AllocationDetailsAddMemoryOffsetLow(b, off & 0xFFFFFFFF)
        fb.AllocationDetailsAddMemoryOffsetHigh(b, off >> 32)
        tables[v] = fb.AllocationDetailsEnd(b)
    outputs = b.CreateNumpyVector(np.asarray([v.index for v in named.outputs + named.extra], dtype=np.int32))
    b.Finish(outputs)
    chunk = bytes(b.Output())
    return chunk, {v: len(chunk) - o for v, o in tables.items()}, len(chunk) - outputs


def _point(buf: bytearray, field: int, target: int) -> None:
    """The offset field at ``field`` made to point at ``target`` (after it)."""
    struct.pack_into("<I", buf, field, target - field)


def _edited_head(data, named: NamedValues) -> tuple[bytes, int, int]:
    """The flatbuffer with the edits appended, the new segment base offset, and the old one."""
    size, old_base, seg_size = _head(data)
    debug = Plan(named.plan.values, named.plan.calls, named.plan.inputs, named.outputs + named.extra)
    memory = plan_memory(debug)
    planned = {v.index: memory.offset_of(v) for v in named.plan.values
               if isinstance(v, TensorValue) and v.storage().weight is None}
    chunk, tables, outputs_at = _appended(named, planned)
    start = align(size, _CHUNK_ALIGNMENT)
    head = bytearray(data[:size]) + bytes(start - size) + chunk
    program = fb.Program.GetRootAs(bytes(data[:size]), 0)
    plan_fb = program.ExecutionPlan(0)
    for i, at in tables.items():
        t = plan_fb.Values(i).Val()
        _point(head, t.Pos + t.Offset(_TENSOR_SLOT["allocation_info"]), start + at)
    tab = plan_fb._tab
    _point(head, tab.Pos + tab.Offset(_PLAN_SLOT["outputs"]), start + outputs_at)
    sizes_at = tab.Vector(tab.Offset(_PLAN_SLOT["non_const_buffer_sizes"]))
    struct.pack_into("<q", head, sizes_at + 8 * MEMORY_ID, memory.arena_size)
    base = align(len(head), SEGMENT_ALIGNMENT)
    struct.pack_into("<QQQ", head, 16, len(head), base, seg_size)
    return bytes(head), base, old_base


def with_outputs(source, dst: str, named: NamedValues) -> None:
    """Write to ``dst`` the debug copy of ``source`` (a ``.pte`` path or its bytes): ``named.extra``
    made outputs after the file's own, the arena planned again."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        head, base, old_base = _edited_head(data, named)
        segments = data[old_base:] if old_base else b""
        with open(dst, "wb") as f:
            f.write(head + bytes(base - len(head)) + segments)
        return
    with open(source, "rb") as f:
        size = _head(f.read(40))[0]
        f.seek(0)
        head, base, old_base = _edited_head(f.read(size), named)
        with open(dst, "wb") as out:
            out.write(head + bytes(base - len(head)))
            if old_base:
                f.seek(old_base)
                shutil.copyfileobj(f, out)
    assert os.path.getsize(dst) >= base
