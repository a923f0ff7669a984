"""``Plan`` + ``MemoryPlan`` + the weights -> the ``.pte`` file: ExecuTorch's ``Program``
flatbuffer (``program.fbs``, file identifier ``ET12``), its extended header, then the
constant segment.

The layout, as exir writes it::

    [0:4]   root offset            [4:8] "ET12"
    [8:40]  extended header: "eh00", u32 length (32), u64 program size (flatbuffer and header),
            u64 segment base offset, u64 segment data size
    [40:]   the rest of the flatbuffer
    pad to SEGMENT_ALIGNMENT, then segment 0: the constants, each CONSTANT_ALIGNMENT-aligned;
    ``constant_segment.offsets[i]`` is buffer i's offset in it (entry 0 is reserved);
    with mutable buffers, pad to SEGMENT_ALIGNMENT, then segment 1: their initial values, laid
    out as the constants; ``mutable_data_segments[0].offsets[i]`` is buffer i's offset in it;
    then, each SEGMENT_ALIGNMENT-aligned, a segment per delegate payload
    (``BackendDelegate.processed``) and one per named blob (``Program.named_data``: a
    payload's constants), in that order (``Segments``)

A weight kept in a ``.ptd`` (``external``: ``ptd.py``) is a tensor with no buffer here: its
``extra_tensor_info`` names its key (``fully_qualified_name``) with ``location = EXTERNAL``, and
its ``data_buffer_idx`` is its segment's index in the ``.ptd`` (as exir writes it; the runtime
reads the key). Each weight (and each mutable buffer's initial value) is streamed from the
archive's memory map into the file once (``segments.stream``); nothing holds all of them at once.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import flatbuffers
import numpy as np

from ..errors import ConversionError
from . import schema_generated as fb
from .flatbuffer_build import finished, table_vector
from .memory_plan import MEMORY_ID, MemoryPlan
from .program import Call, JumpFalse, ListValue, Move, NamedData, Plan, ScalarValue, TensorValue
from .segments import Packing, align, pack, stream, stream_blob

__all__ = ["ConstantLayout", "constant_layout", "Segments", "flatbuffer", "to_bytes", "file_writer",
           "HEADER_MAGIC", "HEADER_LENGTH", "SEGMENT_ALIGNMENT", "CONSTANT_ALIGNMENT", "FILE_IDENTIFIER"]

FILE_IDENTIFIER = b"ET12"
HEADER_MAGIC = b"eh00"
HEADER_LENGTH = 32
SEGMENT_ALIGNMENT = 128  # exir's default segment alignment
CONSTANT_ALIGNMENT = 16  # exir's default constant tensor alignment


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


@dataclass
class Segments:
    """The file's segments, in order: the constants (0), the mutable buffers' initial values (1,
    when there are any), each delegate's payload, then each named blob (a payload's constants)."""

    constants: ConstantLayout
    initial: ConstantLayout | None = None
    payloads: list = field(default_factory=list)  # bytes, one per Plan.delegates entry
    named: list = field(default_factory=list)  # NamedData

    @classmethod
    def of(cls, plan: Plan, constants: ConstantLayout, initial: ConstantLayout | None = None,
           named_elsewhere: bool = False) -> Segments:
        """``named_elsewhere``: the plan's named blobs are written to the ``.ptd``, not here."""
        return cls(constants, initial, [d.payload for d in plan.delegates], [] if named_elsewhere else list(plan.named_data))

    @property
    def first_delegate(self) -> int:
        return 1 if self.initial is None else 2

    @property
    def first_named(self) -> int:
        return self.first_delegate + len(self.payloads)

    def sources(self) -> list:
        head = [self.constants] if self.initial is None else [self.constants, self.initial]
        return head + list(self.payloads) + list(self.named)

    def placement(self) -> tuple[list[tuple[int, int]], int]:
        """(offset from the segment base, size) of every segment, each SEGMENT_ALIGNMENT-aligned,
        and the segments' total size."""
        out, at = [], 0
        for source in self.sources():
            size = _size(source)
            at = align(at, SEGMENT_ALIGNMENT) if out else 0
            out.append((at, size))
            at += size
        return out, at


def _size(source) -> int:
    if isinstance(source, ConstantLayout):
        return source.size
    return source.nbytes if isinstance(source, NamedData) else len(source)


# ------------------------------------------------------------------ the flatbuffer


def _ints(b: flatbuffers.Builder, values, dtype) -> int:
    return b.CreateNumpyVector(np.asarray(list(values), dtype=dtype))


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
        if storage.weight not in buffer_of:  # buffer 0 is "no data": the runtime would read through null
            raise ConversionError(f"tensor {t.name!r} reads weight {storage.weight!r}, which has no constant buffer")
        buffer = buffer_of[storage.weight]
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
    if isinstance(c, Call):
        fb.KernelCallStart(b)
        fb.KernelCallAddOpIndex(b, op_index[c.op])
        fb.KernelCallAddArgs(b, args)
        return fb.InstructionArguments.KernelCall, fb.KernelCallEnd(b)
    fb.DelegateCallStart(b)  # a DelegateCall
    fb.DelegateCallAddDelegateIndex(b, c.delegate)
    fb.DelegateCallAddArgs(b, args)
    return fb.InstructionArguments.DelegateCall, fb.DelegateCallEnd(b)


def _chain(b: flatbuffers.Builder, plan: Plan, op_index: dict) -> int:
    instructions = []
    for c in plan.calls:
        kind, table = _instruction_args(b, c, op_index)
        fb.InstructionStart(b)
        fb.InstructionAddInstrArgsType(b, kind)
        fb.InstructionAddInstrArgs(b, table)
        instructions.append(fb.InstructionEnd(b))
    vec = table_vector(b, instructions)
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
    return table_vector(b, tables)


def _delegates(b: flatbuffers.Builder, plan: Plan, first: int) -> int:
    """``BackendDelegate``s: delegate i's payload is segment ``first + i``."""
    tables = []
    for i, d in enumerate(plan.delegates):
        backend = b.CreateString(d.backend)
        fb.BackendDelegateDataReferenceStart(b)
        fb.BackendDelegateDataReferenceAddLocation(b, fb.DataLocation.SEGMENT)
        fb.BackendDelegateDataReferenceAddIndex(b, first + i)
        processed = fb.BackendDelegateDataReferenceEnd(b)
        specs = table_vector(b, [])
        fb.BackendDelegateStart(b)
        fb.BackendDelegateAddId(b, backend)
        fb.BackendDelegateAddProcessed(b, processed)
        fb.BackendDelegateAddCompileSpecs(b, specs)
        tables.append(fb.BackendDelegateEnd(b))
    return table_vector(b, tables)


def _named_data(b: flatbuffers.Builder, segs: Segments) -> int:
    """``NamedData``: the named blobs the ``.pte`` holds, blob i in segment ``segs.first_named + i``."""
    tables = []
    first = segs.first_named
    for i, blob in enumerate(segs.named):
        key = b.CreateString(blob.key)
        fb.NamedDataStart(b)
        fb.NamedDataAddKey(b, key)
        fb.NamedDataAddSegmentIndex(b, first + i)
        tables.append(fb.NamedDataEnd(b))
    return table_vector(b, tables)


def flatbuffer(plan: Plan, memory: MemoryPlan, segs: Segments, buffer_of: dict,
               in_spec: str, out_spec: str, external: dict | None = None, initial_of: dict | None = None) -> bytes:
    """The ``Program`` flatbuffer (no extended header yet). ``segs``: the segments the file holds
    (``Segments.of(plan, ...)``). ``external``: each weight kept in a ``.ptd`` (placeholder name) ->
    (its key, its segment index there). ``initial_of``: each mutable buffer placeholder's index in
    ``segs.initial``."""
    b = flatbuffers.Builder(1024)
    ops = plan.operators()
    op_index = {op: i for i, op in enumerate(ops)}
    values = [_evalue(b, v, memory, buffer_of, external or {}, initial_of or {}) for v in plan.values]
    values_vec = table_vector(b, values)
    chain = _chain(b, plan, op_index)
    chains = table_vector(b, [chain])
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
    delegates = _delegates(b, plan, segs.first_delegate)
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
    plans = table_vector(b, [plan_table])
    constant_segment = _subsegments(b, 0, segs.constants)
    mutable_segments = table_vector(b, [_subsegments(b, 1, segs.initial)]) if segs.initial is not None else None
    segment_tables = []
    for offset, size in segs.placement()[0]:
        fb.DataSegmentStart(b)
        fb.DataSegmentAddOffset(b, offset)
        fb.DataSegmentAddSize(b, size)
        segment_tables.append(fb.DataSegmentEnd(b))
    segments = table_vector(b, segment_tables)
    named_data = _named_data(b, segs)
    empty_buffers = table_vector(b, [])
    empty_inline = table_vector(b, [])
    fb.ProgramStart(b)
    fb.ProgramAddVersion(b, 0)
    fb.ProgramAddExecutionPlan(b, plans)
    fb.ProgramAddConstantBuffer(b, empty_buffers)
    fb.ProgramAddBackendDelegateData(b, empty_inline)
    fb.ProgramAddSegments(b, segments)
    fb.ProgramAddConstantSegment(b, constant_segment)
    if mutable_segments is not None:
        fb.ProgramAddMutableDataSegments(b, mutable_segments)
    if segs.named:
        fb.ProgramAddNamedData(b, named_data)
    return finished(b, fb.ProgramEnd(b), FILE_IDENTIFIER, "the program's")


def _subsegments(b: flatbuffers.Builder, segment_index: int, layout: ConstantLayout) -> int:
    offsets = _ints(b, layout.offsets, np.uint64)
    fb.SubsegmentOffsetsStart(b)
    fb.SubsegmentOffsetsAddSegmentIndex(b, segment_index)
    fb.SubsegmentOffsetsAddOffsets(b, offsets)
    return fb.SubsegmentOffsetsEnd(b)


# ------------------------------------------------------------------ header and segments


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


def _write_segments(f, head: bytes, base: int, segs: Segments) -> None:
    f.write(head)
    f.write(b"\0" * (base - len(head)))
    at = 0  # bytes written past the segment base
    for source, (start, size) in zip(segs.sources(), segs.placement()[0]):
        f.write(b"\0" * (start - at))
        if isinstance(source, ConstantLayout):
            stream(f, source.packing)
        elif isinstance(source, NamedData):
            stream_blob(f, source)
        else:  # a delegate's payload
            f.write(source)
        at = start + size


def to_bytes(program: bytes, segs: Segments) -> bytes:
    import io

    head, base = with_header(program, segs.placement()[1])
    buf = io.BytesIO()
    _write_segments(buf, head, base, segs)
    return buf.getvalue()


def file_writer(program: bytes, segs: Segments):
    """What fills the ``.pte`` (``serde.atomic_write``'s ``Fill``): header, flatbuffer, then every
    segment streamed (the constants, the mutable buffers' initial values, payloads, named blobs)."""
    head, base = with_header(program, segs.placement()[1])
    return lambda f: _write_segments(f, head, base, segs)
