"""``Plan`` + ``MemoryPlan`` + the weights -> the ``.pte`` file: ExecuTorch's ``Program``
flatbuffer (``program.fbs``, file identifier ``ET12``), its extended header, then the
constant segment.

The layout, as exir writes it::

    [0:4]   root offset            [4:8] "ET12"
    [8:40]  extended header: "eh00", u32 length (32), u64 program size (flatbuffer and header),
            u64 segment base offset, u64 segment data size
    [40:]   the rest of the flatbuffer
    pad to SEGMENT_ALIGNMENT, then segment 0: the constants, each CONSTANT_ALIGNMENT-aligned;
    ``constant_segment.offsets[i]`` is buffer i's offset in it (entry 0 is reserved); then, each
    SEGMENT_ALIGNMENT-aligned, a segment per delegate payload (``BackendDelegate.processed``) and
    one per named blob (``Program.named_data``: a payload's constants), in that order

Each weight is streamed from the archive's memory map into the file once (``write_file``);
nothing holds all of them at once.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import flatbuffers
import numpy as np

from ...serde.atomic_write import write_atomically
from ..errors import ConversionError
from . import schema_generated as fb
from .arrays import byte_chunks
from .memory_plan import MEMORY_ID, MemoryPlan
from .program import Call, ListValue, NamedData, Plan, ScalarValue, TensorValue

__all__ = ["ConstantLayout", "constant_layout", "flatbuffer", "to_bytes", "write_file", "extra_segments", "segment_offsets",
           "HEADER_MAGIC", "HEADER_LENGTH", "SEGMENT_ALIGNMENT", "CONSTANT_ALIGNMENT", "FILE_IDENTIFIER"]

FILE_IDENTIFIER = b"ET12"
HEADER_MAGIC = b"eh00"
HEADER_LENGTH = 32
SEGMENT_ALIGNMENT = 128  # exir's default segment alignment
CONSTANT_ALIGNMENT = 16  # exir's default constant tensor alignment
_MAX_FLATBUFFER = 2**31 - 1


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


@dataclass
class ConstantLayout:
    arrays: list  # buffer i (from 1) -> its numpy array
    offsets: list  # offsets[i]: buffer i's offset in the segment; offsets[0] reserved (0)
    size: int  # the segment's bytes


def constant_layout(arrays: list) -> ConstantLayout:
    offsets, at = [0], 0
    for a in arrays:
        at = _align(at, CONSTANT_ALIGNMENT)
        offsets.append(at)
        at += a.nbytes
    return ConstantLayout(list(arrays), offsets, at)


# ------------------------------------------------------------------ the flatbuffer


def _ints(b: flatbuffers.Builder, values, dtype) -> int:
    return b.CreateNumpyVector(np.asarray(list(values), dtype=dtype))


def _tables(b: flatbuffers.Builder, offsets: list) -> int:
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _tensor(b: flatbuffers.Builder, t: TensorValue, memory: MemoryPlan, buffer_of: dict) -> int:
    sizes = _ints(b, t.sizes, np.int32)
    dim_order = _ints(b, range(len(t.sizes)), np.uint8)
    storage = t.storage()
    alloc = None
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
    fb.TensorAddDataBufferIdx(b, buffer_of.get(storage.weight, 0) if storage.weight is not None else 0)
    if alloc is not None:
        fb.TensorAddAllocationInfo(b, alloc)
    fb.TensorAddLayout(b, 0)
    fb.TensorAddShapeDynamism(b, fb.TensorShapeDynamism.DYNAMIC_BOUND if t.dynamic else fb.TensorShapeDynamism.STATIC)
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
    items = _ints(b, (x.index for x in v.items), np.int32)
    fb.TensorListStart(b)
    fb.TensorListAddItems(b, items)
    return fb.KernelTypes.TensorList, fb.TensorListEnd(b)


def _evalue(b: flatbuffers.Builder, v, memory: MemoryPlan, buffer_of: dict) -> int:
    if isinstance(v, TensorValue):
        kind, table = fb.KernelTypes.Tensor, _tensor(b, v, memory, buffer_of)
    elif isinstance(v, ListValue):
        kind, table = _list(b, v)
    else:
        kind, table = _scalar(b, v)
    fb.EValueStart(b)
    fb.EValueAddValType(b, kind)
    fb.EValueAddVal(b, table)
    return fb.EValueEnd(b)


def _instruction(b: flatbuffers.Builder, c, op_index: dict) -> int:
    args = _ints(b, (v.index for v in c.args), np.int32)
    if isinstance(c, Call):
        fb.KernelCallStart(b)
        fb.KernelCallAddOpIndex(b, op_index[c.op])
        fb.KernelCallAddArgs(b, args)
        kind, call = fb.InstructionArguments.KernelCall, fb.KernelCallEnd(b)
    else:
        fb.DelegateCallStart(b)
        fb.DelegateCallAddDelegateIndex(b, c.delegate)
        fb.DelegateCallAddArgs(b, args)
        kind, call = fb.InstructionArguments.DelegateCall, fb.DelegateCallEnd(b)
    fb.InstructionStart(b)
    fb.InstructionAddInstrArgsType(b, kind)
    fb.InstructionAddInstrArgs(b, call)
    return fb.InstructionEnd(b)


def _chain(b: flatbuffers.Builder, plan: Plan, op_index: dict) -> int:
    instructions = [_instruction(b, c, op_index) for c in plan.calls]
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


def _delegates(b: flatbuffers.Builder, plan: Plan) -> int:
    """``BackendDelegate``s: delegate i's payload is segment 1 + i (segment 0 holds the constants)."""
    tables = []
    for i, d in enumerate(plan.delegates):
        backend = b.CreateString(d.backend)
        fb.BackendDelegateDataReferenceStart(b)
        fb.BackendDelegateDataReferenceAddLocation(b, fb.DataLocation.SEGMENT)
        fb.BackendDelegateDataReferenceAddIndex(b, 1 + i)
        processed = fb.BackendDelegateDataReferenceEnd(b)
        specs = _tables(b, [])
        fb.BackendDelegateStart(b)
        fb.BackendDelegateAddId(b, backend)
        fb.BackendDelegateAddProcessed(b, processed)
        fb.BackendDelegateAddCompileSpecs(b, specs)
        tables.append(fb.BackendDelegateEnd(b))
    return _tables(b, tables)


def _named_data(b: flatbuffers.Builder, plan: Plan) -> int:
    """``NamedData``: blob i is segment 1 + len(delegates) + i."""
    tables = []
    first = 1 + len(plan.delegates)
    for i, blob in enumerate(plan.named_data):
        key = b.CreateString(blob.key)
        fb.NamedDataStart(b)
        fb.NamedDataAddKey(b, key)
        fb.NamedDataAddSegmentIndex(b, first + i)
        tables.append(fb.NamedDataEnd(b))
    return _tables(b, tables)


def extra_segments(plan: Plan) -> list:
    """The segments after the constants', in order: each delegate's payload (bytes), then each
    named blob (``NamedData``, streamed)."""
    return [d.payload for d in plan.delegates] + list(plan.named_data)


def _size(source) -> int:
    return source.nbytes if isinstance(source, NamedData) else len(source)


def segment_offsets(constants: ConstantLayout, extra: list) -> tuple[list[tuple[int, int]], int]:
    """(offset, size) of every segment from the segment base, and the segments' total size."""
    out, at = [(0, constants.size)], constants.size
    for source in extra:
        at = _align(at, SEGMENT_ALIGNMENT)
        out.append((at, _size(source)))
        at += _size(source)
    return out, at


def flatbuffer(plan: Plan, memory: MemoryPlan, constants: ConstantLayout, buffer_of: dict,
               in_spec: str, out_spec: str) -> bytes:
    """The ``Program`` flatbuffer (no extended header yet)."""
    b = flatbuffers.Builder(1024)
    ops = plan.operators()
    op_index = {op: i for i, op in enumerate(ops)}
    values = [_evalue(b, v, memory, buffer_of) for v in plan.values]
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
    delegates = _delegates(b, plan)
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
    offsets = _ints(b, constants.offsets, np.uint64)
    fb.SubsegmentOffsetsStart(b)
    fb.SubsegmentOffsetsAddSegmentIndex(b, 0)
    fb.SubsegmentOffsetsAddOffsets(b, offsets)
    constant_segment = fb.SubsegmentOffsetsEnd(b)
    segment_tables = []
    for offset, size in segment_offsets(constants, extra_segments(plan))[0]:
        fb.DataSegmentStart(b)
        fb.DataSegmentAddOffset(b, offset)
        fb.DataSegmentAddSize(b, size)
        segment_tables.append(fb.DataSegmentEnd(b))
    segments = _tables(b, segment_tables)
    named_data = _named_data(b, plan)
    empty_buffers = _tables(b, [])
    empty_inline = _tables(b, [])
    fb.ProgramStart(b)
    fb.ProgramAddVersion(b, 0)
    fb.ProgramAddExecutionPlan(b, plans)
    fb.ProgramAddConstantBuffer(b, empty_buffers)
    fb.ProgramAddBackendDelegateData(b, empty_inline)
    fb.ProgramAddSegments(b, segments)
    fb.ProgramAddConstantSegment(b, constant_segment)
    if plan.named_data:
        fb.ProgramAddNamedData(b, named_data)
    b.Finish(fb.ProgramEnd(b), file_identifier=FILE_IDENTIFIER)
    out = bytes(b.Output())
    if len(out) > _MAX_FLATBUFFER:
        raise ConversionError("the program's flatbuffer passes flatbuffers' 2 GiB limit")
    return out


# ------------------------------------------------------------------ header and segments


def with_header(program: bytes, segment_size: int) -> tuple[bytes, int]:
    """The flatbuffer with the extended header inserted after the file identifier (the root
    offset moved past it; every other offset is relative and stays), and the segment base offset."""
    if program[4:8] != FILE_IDENTIFIER:
        raise ConversionError("the program flatbuffer has no ET12 identifier")
    size = len(program) + HEADER_LENGTH
    base = _align(size, SEGMENT_ALIGNMENT)
    root = struct.unpack_from("<I", program, 0)[0] + HEADER_LENGTH
    header = HEADER_MAGIC + struct.pack("<IQQQ", HEADER_LENGTH, size, base, segment_size)
    return struct.pack("<I", root) + program[4:8] + header + program[8:], base


def _write_segments(f, head: bytes, base: int, constants: ConstantLayout, extra: list) -> None:
    f.write(head)
    at = len(head)
    f.write(b"\0" * (base - at))
    at = 0
    for arr, off in zip(constants.arrays, constants.offsets[1:]):
        f.write(b"\0" * (off - at))
        _write_array(f, arr)
        at = off + arr.nbytes
    at = constants.size
    for source, (off, size) in zip(extra, segment_offsets(constants, extra)[0][1:]):
        f.write(b"\0" * (off - at))
        written = 0
        for part in (source.chunks() if isinstance(source, NamedData) else (source,)):
            f.write(part)
            written += memoryview(part).nbytes
        if written != size:
            raise ConversionError(f"segment at {off} wrote {written} bytes, {size} planned")
        at = off + size


def _write_array(f, arr: np.ndarray) -> None:
    """One weight's bytes, little-endian, C order, at most ``arrays.CHUNK`` of them copied at once."""
    for part in byte_chunks(arr):
        f.write(part)


def to_bytes(program: bytes, constants: ConstantLayout, extra: list = ()) -> bytes:
    import io

    head, base = with_header(program, segment_offsets(constants, list(extra))[1])
    buf = io.BytesIO()
    _write_segments(buf, head, base, constants, list(extra))
    return buf.getvalue()


def write_file(dst, program: bytes, constants: ConstantLayout, extra: list = ()) -> None:
    """``extra``: ``extra_segments(plan)``, the segments after the constants'."""
    head, base = with_header(program, segment_offsets(constants, list(extra))[1])
    write_atomically(dst, lambda f: _write_segments(f, head, base, constants, list(extra)))
