"""``Plan`` + ``MemoryPlan`` + the weights -> the ``.pte`` file: ExecuTorch's ``Program``
flatbuffer (``program.fbs``, file identifier ``ET12``), its extended header, then the
constant segment.

The layout, as exir writes it::

    [0:4]   root offset            [4:8] "ET12"
    [8:40]  extended header: "eh00", u32 length (32), u64 program size (flatbuffer and header),
            u64 segment base offset, u64 segment data size
    [40:]   the rest of the flatbuffer
    pad to SEGMENT_ALIGNMENT, then segment 0: the constants, each CONSTANT_ALIGNMENT-aligned;
    ``constant_segment.offsets[i]`` is buffer i's offset in it (entry 0 is reserved)
    with mutable buffers, pad to SEGMENT_ALIGNMENT, then segment 1: their initial values, laid
    out as the constants; ``mutable_data_segments[0].offsets[i]`` is buffer i's offset in it

A weight kept in a ``.ptd`` (``external``: ``ptd.py``) is a tensor with no buffer here: its
``extra_tensor_info`` names its key (``fully_qualified_name``) with ``location = EXTERNAL``, and
its ``data_buffer_idx`` is its segment's index in the ``.ptd`` (as exir writes it; the runtime
reads the key). Each weight (and each mutable buffer's initial value) is streamed from the
archive's memory map into the file once (``segments.stream``); nothing holds all of them at once.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import flatbuffers
import numpy as np

from ..errors import ConversionError
from . import schema_generated as fb
from .memory_plan import MEMORY_ID, MemoryPlan
from .program import JumpFalse, ListValue, Move, Plan, ScalarValue, TensorValue
from .segments import Packing, align, pack, stream

__all__ = ["ConstantLayout", "constant_layout", "flatbuffer", "to_bytes", "file_writer",
           "HEADER_MAGIC", "HEADER_LENGTH", "SEGMENT_ALIGNMENT", "CONSTANT_ALIGNMENT", "FILE_IDENTIFIER"]

FILE_IDENTIFIER = b"ET12"
HEADER_MAGIC = b"eh00"
HEADER_LENGTH = 32
SEGMENT_ALIGNMENT = 128  # exir's default segment alignment
CONSTANT_ALIGNMENT = 16  # exir's default constant tensor alignment
_MAX_FLATBUFFER = 2**31 - 1


@dataclass
class ConstantLayout:
    packing: Packing  # buffer i (from 1) is packing.arrays[i - 1]

    @property
    def offsets(self) -> list:
        """``constant_segment.offsets``: buffer i's offset in the segment; entry 0 reserved (0)."""
        return [0] + self.packing.offsets

    @property
    def size(self) -> int:
        return self.packing.size


def constant_layout(arrays: list) -> ConstantLayout:
    return ConstantLayout(pack(arrays, CONSTANT_ALIGNMENT))


# ------------------------------------------------------------------ the flatbuffer


def _ints(b: flatbuffers.Builder, values, dtype) -> int:
    return b.CreateNumpyVector(np.asarray(list(values), dtype=dtype))


def _tables(b: flatbuffers.Builder, offsets: list) -> int:
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _external_info(b: flatbuffers.Builder, key: str) -> int:
    name = b.CreateString(key)
    fb.ExtraTensorInfoStart(b)
    fb.ExtraTensorInfoAddFullyQualifiedName(b, name)
    fb.ExtraTensorInfoAddLocation(b, fb.TensorDataLocation.EXTERNAL)
    return fb.ExtraTensorInfoEnd(b)


def _tensor(b: flatbuffers.Builder, t: TensorValue, memory: MemoryPlan, buffer_of: dict, external: dict,
            initial_of: dict) -> int:
    sizes = _ints(b, t.sizes, np.int32)
    dim_order = _ints(b, range(len(t.sizes)), np.uint8)
    storage = t.storage()
    alloc = extra = None
    if storage.weight in external:
        key, buffer = external[storage.weight]
        extra = _external_info(b, key)
    elif storage.weight is not None:  # a constant's buffer in the constant segment
        buffer = buffer_of.get(storage.weight, 0)
    else:  # a mutable buffer's initial value in the mutable segment
        buffer = initial_of.get(storage.initial, 0) if t is storage and storage.initial else 0
    if storage.weight is None:
        off = memory.offset_of(t)
        fb.AllocationDetailsStart(b)
        fb.AllocationDetailsAddMemoryId(b, MEMORY_ID)
        fb.AllocationDetailsAddMemoryOffsetLow(b, off & 0xFFFFFFFF)
        fb.AllocationDetailsAddMemoryOffsetHigh(b, off >> 32)
        alloc = fb.AllocationDetailsEnd(b)
    fb.TensorStart(b)
    fb.TensorAddScalarType(b, t.scalar_type)
    fb.TensorAddStorageOffset(b, 0)
    fb.TensorAddSizes(b, sizes)
    fb.TensorAddDimOrder(b, dim_order)
    fb.TensorAddRequiresGrad(b, False)
    fb.TensorAddDataBufferIdx(b, buffer)
    if alloc is not None:
        fb.TensorAddAllocationInfo(b, alloc)
    fb.TensorAddLayout(b, 0)
    fb.TensorAddShapeDynamism(b, fb.TensorShapeDynamism.DYNAMIC_BOUND if t.dynamic else fb.TensorShapeDynamism.STATIC)
    if extra is not None:
        fb.TensorAddExtraTensorInfo(b, extra)
    return fb.TensorEnd(b)


def _scalar(b: flatbuffers.Builder, v: ScalarValue) -> tuple[int, int]:
    if v.kind == "Null":
        fb.NullStart(b)
        return fb.KernelTypes.Null, fb.NullEnd(b)
    if v.kind == "Int":
        fb.IntStart(b)
        fb.IntAddIntVal(b, int(v.value))
        return fb.KernelTypes.Int, fb.IntEnd(b)
    if v.kind == "Double":
        fb.DoubleStart(b)
        fb.DoubleAddDoubleVal(b, float(v.value))
        return fb.KernelTypes.Double, fb.DoubleEnd(b)
    if v.kind == "Bool":
        fb.BoolStart(b)
        fb.BoolAddBoolVal(b, bool(v.value))
        return fb.KernelTypes.Bool, fb.BoolEnd(b)
    if v.kind == "String":
        s = b.CreateString(v.value)
        fb.StringStart(b)
        fb.StringAddStringVal(b, s)
        return fb.KernelTypes.String, fb.StringEnd(b)
    raise ConversionError(f"no EValue kind {v.kind!r}")


def _list(b: flatbuffers.Builder, v: ListValue) -> tuple[int, int]:
    if v.kind == "IntList":
        items = _ints(b, (x.index for x in v.items), np.int64)
        fb.IntListStart(b)
        fb.IntListAddItems(b, items)
        return fb.KernelTypes.IntList, fb.IntListEnd(b)
    if v.kind == "DoubleList":  # values inline
        items = _ints(b, v.items, np.float64)
        fb.DoubleListStart(b)
        fb.DoubleListAddItems(b, items)
        return fb.KernelTypes.DoubleList, fb.DoubleListEnd(b)
    if v.kind == "BoolList":
        items = _ints(b, v.items, np.bool_)
        fb.BoolListStart(b)
        fb.BoolListAddItems(b, items)
        return fb.KernelTypes.BoolList, fb.BoolListEnd(b)
    if v.kind == "OptionalTensorList":  # -1 for None
        items = _ints(b, (-1 if x is None else x.index for x in v.items), np.int32)
        fb.OptionalTensorListStart(b)
        fb.OptionalTensorListAddItems(b, items)
        return fb.KernelTypes.OptionalTensorList, fb.OptionalTensorListEnd(b)
    items = _ints(b, (x.index for x in v.items), np.int32)
    fb.TensorListStart(b)
    fb.TensorListAddItems(b, items)
    return fb.KernelTypes.TensorList, fb.TensorListEnd(b)


def _evalue(b: flatbuffers.Builder, v, memory: MemoryPlan, buffer_of: dict, external: dict, initial_of: dict) -> int:
    if isinstance(v, TensorValue):
        kind, table = fb.KernelTypes.Tensor, _tensor(b, v, memory, buffer_of, external, initial_of)
    elif isinstance(v, ListValue):
        kind, table = _list(b, v)
    else:
        kind, table = _scalar(b, v)
    fb.EValueStart(b)
    fb.EValueAddValType(b, kind)
    fb.EValueAddVal(b, table)
    return fb.EValueEnd(b)


def _instruction_args(b: flatbuffers.Builder, c, op_index: dict) -> tuple[int, int]:
    """(``InstructionArguments`` kind, table) of one entry of ``Plan.calls``."""
    if isinstance(c, JumpFalse):
        fb.JumpFalseCallStart(b)
        fb.JumpFalseCallAddCondValueIndex(b, c.cond.index)
        fb.JumpFalseCallAddDestinationInstruction(b, c.destination)
        return fb.InstructionArguments.JumpFalseCall, fb.JumpFalseCallEnd(b)
    if isinstance(c, Move):
        fb.MoveCallStart(b)
        fb.MoveCallAddMoveFrom(b, c.source.index)
        fb.MoveCallAddMoveTo(b, c.dest.index)
        return fb.InstructionArguments.MoveCall, fb.MoveCallEnd(b)
    args = _ints(b, (v.index for v in c.args), np.int32)
    fb.KernelCallStart(b)
    fb.KernelCallAddOpIndex(b, op_index[c.op])
    fb.KernelCallAddArgs(b, args)
    return fb.InstructionArguments.KernelCall, fb.KernelCallEnd(b)


def _chain(b: flatbuffers.Builder, plan: Plan, op_index: dict) -> int:
    instructions = []
    for c in plan.calls:
        kind, table = _instruction_args(b, c, op_index)
        fb.InstructionStart(b)
        fb.InstructionAddInstrArgsType(b, kind)
        fb.InstructionAddInstrArgs(b, table)
        instructions.append(fb.InstructionEnd(b))
    vec = _tables(b, instructions)
    empty_in, empty_out = _ints(b, [], np.int32), _ints(b, [], np.int32)
    fb.ChainStart(b)
    fb.ChainAddInputs(b, empty_in)
    fb.ChainAddOutputs(b, empty_out)
    fb.ChainAddInstructions(b, vec)
    return fb.ChainEnd(b)


def _operators(b: flatbuffers.Builder, ops: list) -> int:
    tables = []
    for name, overload in ops:
        n, o = b.CreateString(name), b.CreateString(overload)
        fb.OperatorStart(b)
        fb.OperatorAddName(b, n)
        fb.OperatorAddOverload(b, o)
        tables.append(fb.OperatorEnd(b))
    return _tables(b, tables)


def flatbuffer(plan: Plan, memory: MemoryPlan, constants: ConstantLayout, buffer_of: dict,
               in_spec: str, out_spec: str, external: dict | None = None, initial: ConstantLayout | None = None,
               initial_of: dict | None = None) -> bytes:
    """The ``Program`` flatbuffer (no extended header yet). ``external``: each weight kept in a
    ``.ptd`` (placeholder name) -> (its key, its segment index there). ``initial``/``initial_of``:
    the mutable buffers' initial values (segment 1) and each buffer placeholder's index in them."""
    b = flatbuffers.Builder(1024)
    ops = plan.operators()
    op_index = {op: i for i, op in enumerate(ops)}
    values = [_evalue(b, v, memory, buffer_of, external or {}, initial_of or {}) for v in plan.values]
    values_vec = _tables(b, values)
    chain = _chain(b, plan, op_index)
    chains = _tables(b, [chain])
    operators = _operators(b, ops)
    inputs = _ints(b, (v.index for v in plan.inputs), np.int32)
    outputs = _ints(b, (v.index for v in plan.outputs), np.int32)
    sizes = _ints(b, [0, memory.arena_size], np.int64)
    name = b.CreateString("forward")
    inp, outp = b.CreateString(in_spec), b.CreateString(out_spec)
    fb.ContainerMetadataStart(b)
    fb.ContainerMetadataAddEncodedInpStr(b, inp)
    fb.ContainerMetadataAddEncodedOutStr(b, outp)
    meta = fb.ContainerMetadataEnd(b)
    delegates = _tables(b, [])
    fb.ExecutionPlanStart(b)
    fb.ExecutionPlanAddName(b, name)
    fb.ExecutionPlanAddContainerMetaType(b, meta)
    fb.ExecutionPlanAddValues(b, values_vec)
    fb.ExecutionPlanAddInputs(b, inputs)
    fb.ExecutionPlanAddOutputs(b, outputs)
    fb.ExecutionPlanAddChains(b, chains)
    fb.ExecutionPlanAddOperators(b, operators)
    fb.ExecutionPlanAddDelegates(b, delegates)
    fb.ExecutionPlanAddNonConstBufferSizes(b, sizes)
    plan_table = fb.ExecutionPlanEnd(b)
    plans = _tables(b, [plan_table])
    constant_segment = _subsegments(b, 0, constants)
    mutable_segments = _tables(b, [_subsegments(b, 1, initial)]) if initial is not None else None
    layouts = _segment_layouts(constants, initial)
    segment_tables = []
    for offset, layout in layouts:
        fb.DataSegmentStart(b)
        fb.DataSegmentAddOffset(b, offset)
        fb.DataSegmentAddSize(b, layout.size)
        segment_tables.append(fb.DataSegmentEnd(b))
    segments = _tables(b, segment_tables)
    empty_buffers = _tables(b, [])
    fb.ProgramStart(b)
    fb.ProgramAddVersion(b, 0)
    fb.ProgramAddExecutionPlan(b, plans)
    fb.ProgramAddConstantBuffer(b, empty_buffers)
    fb.ProgramAddSegments(b, segments)
    fb.ProgramAddConstantSegment(b, constant_segment)
    if mutable_segments is not None:
        fb.ProgramAddMutableDataSegments(b, mutable_segments)
    b.Finish(fb.ProgramEnd(b), file_identifier=FILE_IDENTIFIER)
    out = bytes(b.Output())
    if len(out) > _MAX_FLATBUFFER:
        raise ConversionError("the program's flatbuffer passes flatbuffers' 2 GiB limit")
    return out


def _subsegments(b: flatbuffers.Builder, segment_index: int, layout: ConstantLayout) -> int:
    offsets = _ints(b, layout.offsets, np.uint64)
    fb.SubsegmentOffsetsStart(b)
    fb.SubsegmentOffsetsAddSegmentIndex(b, segment_index)
    fb.SubsegmentOffsetsAddOffsets(b, offsets)
    return fb.SubsegmentOffsetsEnd(b)


# ------------------------------------------------------------------ header and segments


def _segment_layouts(constants: ConstantLayout, initial: ConstantLayout | None) -> list[tuple[int, ConstantLayout]]:
    """(offset from the segment base, layout) of each segment: the constants, then the mutable
    buffers' initial values (when there are any), each SEGMENT_ALIGNMENT-aligned."""
    out = [(0, constants)]
    if initial is not None:
        out.append((align(constants.size, SEGMENT_ALIGNMENT), initial))
    return out


def _segments_size(constants: ConstantLayout, initial: ConstantLayout | None) -> int:
    offset, last = _segment_layouts(constants, initial)[-1]
    return offset + last.size


def with_header(program: bytes, segment_size: int) -> tuple[bytes, int]:
    """The flatbuffer with the extended header inserted after the file identifier (the root
    offset moved past it; every other offset is relative and stays), and the segment base offset."""
    if program[4:8] != FILE_IDENTIFIER:
        raise ConversionError("the program flatbuffer has no ET12 identifier")
    size = len(program) + HEADER_LENGTH
    base = align(size, SEGMENT_ALIGNMENT)
    root = struct.unpack_from("<I", program, 0)[0] + HEADER_LENGTH
    header = HEADER_MAGIC + struct.pack("<IQQQ", HEADER_LENGTH, size, base, segment_size)
    return struct.pack("<I", root) + program[4:8] + header + program[8:], base


def _write_segments(f, head: bytes, base: int, constants: ConstantLayout, initial: ConstantLayout | None) -> None:
    f.write(head)
    f.write(b"\0" * (base - len(head)))
    at = 0  # bytes written past the segment base
    for start, layout in _segment_layouts(constants, initial):
        f.write(b"\0" * (start - at))
        stream(f, layout.packing)
        f.write(b"\0" * (layout.size - layout.packing.size))
        at = start + layout.size


def to_bytes(program: bytes, constants: ConstantLayout, initial: ConstantLayout | None = None) -> bytes:
    import io

    head, base = with_header(program, _segments_size(constants, initial))
    buf = io.BytesIO()
    _write_segments(buf, head, base, constants, initial)
    return buf.getvalue()


def file_writer(program: bytes, constants: ConstantLayout, initial: ConstantLayout | None = None):
    """What fills the ``.pte`` (``serde.atomic_write``'s ``Fill``): header, flatbuffer, the constants
    and the mutable buffers' initial values streamed."""
    head, base = with_header(program, _segments_size(constants, initial))
    return lambda f: _write_segments(f, head, base, constants, initial)
