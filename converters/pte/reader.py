"""Read an ExecuTorch ``.pte`` file, torch-free and defensively: ``read_pte(path_or_bytes)`` -> a
summary dict (what ``pt2x inspect`` prints and ``pt2x validate`` checks).

The ``Program`` flatbuffer is read with flatc's generated module (``schema_generated.py``), but
nothing it points at is trusted: before a table, vector or string is used its position, vtable
and length are checked to lie inside the flatbuffer (``flatbuffer_checks.Checked``), every index (value, operator,
delegate, instruction, segment, constant buffer, memory id) is checked against what it indexes,
the extended header's sizes against the file, and the work is bounded (``MAX_*``). Any failure,
flatbuffers' own exceptions included, is a ``Pt2FormatError`` whose ``path`` names the field
(``execution_plan[0].values[3].val.sizes``). Nothing in the file is executed.
"""

from __future__ import annotations

import functools
import os
import stat
import struct

from ...serde.errors import Pt2FormatError, extra_required
from .delegate_reader import external_blobs
from .flatbuffer_checks import MAX_FLATBUFFER, MAX_ITEMS, Checked, fail

__all__ = ["read_pte", "is_pte", "MAX_PLANS", "MAX_VALUES", "MAX_INSTRUCTIONS", "MAX_ITEMS"]

FILE_IDENTIFIER = b"ET12"
HEADER_MAGIC = b"eh00"
_HEADER_MIN = 24  # magic, length, program size, segment base offset (exir's MINIMUM_LENGTH)
MAX_PLANS = 1_000
MAX_VALUES = 2_000_000
MAX_INSTRUCTIONS = 2_000_000
MAX_RANK = 64
_HEAD_BYTES = 64  # exir's NUM_HEAD_BYTES: enough for the identifier and the extended header

_ELEMENT_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 12: 1, 13: 1, 14: 4, 15: 2,
                  16: 1, 17: 1, 22: 2, 23: 1, 24: 1, 25: 1, 26: 1}
_DYNAMISM = {0: "STATIC", 1: "DYNAMIC_BOUND", 2: "DYNAMIC_UNBOUND"}
_KINDS = {1: "Null", 2: "Int", 3: "Bool", 4: "Double", 5: "Tensor", 6: "String", 7: "IntList",
          8: "DoubleList", 9: "BoolList", 10: "TensorList", 11: "OptionalTensorList"}
_INSTRUCTIONS = {1: "KernelCall", 2: "DelegateCall", 3: "MoveCall", 4: "JumpFalseCall", 5: "FreeCall"}

# vtable slot of each field the reader follows (program.fbs order: field i is at 4 + 2 * i)
_SLOT = {n: 4 + 2 * i for i, n in enumerate(
    ("version", "execution_plan", "constant_buffer", "backend_delegate_data", "segments",
     "constant_segment", "mutable_data_segments", "named_data"))}
_PLAN_SLOT = {n: 4 + 2 * i for i, n in enumerate(
    ("name", "container_meta_type", "values", "inputs", "outputs", "chains", "operators", "delegates",
     "non_const_buffer_sizes", "non_const_buffer_device"))}
_TENSOR_SLOT = {n: 4 + 2 * i for i, n in enumerate(
    ("scalar_type", "storage_offset", "sizes", "dim_order", "requires_grad", "data_buffer_idx",
     "allocation_info", "layout", "shape_dynamism", "extra_tensor_info"))}
_NAMED_DATA_KEY = 4  # NamedData field 0: key
_CHAIN_SLOT = {n: 4 + 2 * i for i, n in enumerate(("inputs", "outputs", "instructions", "stacktrace"))}
_CALL_ARGS = 6  # KernelCall.args / DelegateCall.args
_ITEMS = 4  # IntList / DoubleList / BoolList / TensorList / OptionalTensorList .items
_EXTRA_SLOT = {"fully_qualified_name": 6}
_EXTERNAL = 1  # TensorDataLocation.EXTERNAL: the data is in a .ptd, found by the tensor's key
_OPERATOR_SLOT = {"name": 4, "overload": 6}
_DELEGATE_SLOT = {"id": 4, "processed": 6, "compile_specs": 8}
_SUBSEGMENT_OFFSETS = 6
_BUFFER_STORAGE = 4
_INLINE_DATA = 4


def is_pte(path: str) -> bool:
    """Whether ``path`` names a ``.pte`` (by its name, or by ``ET12`` at bytes 4:8)."""
    return is_flatbuffer_file(path, ".pte", FILE_IDENTIFIER)


def is_flatbuffer_file(path: str, suffix: str, identifier: bytes) -> bool:
    """Whether ``path`` ends in ``suffix`` or is a regular file with the flatbuffer file
    ``identifier`` at bytes 4:8 (a FIFO or device is never opened here)."""
    if path.lower().endswith(suffix):
        return True
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            return f.read(8)[4:8] == identifier
    except OSError:
        return False


def _header(data, size: int) -> dict | None:
    if size < 8:
        fail("file", f"{size} bytes: too short for a .pte (a flatbuffer needs at least 8)")
    if bytes(data[4:8]) != FILE_IDENTIFIER:
        fail("file_identifier", f"{bytes(data[4:8])!r} is not ExecuTorch's {FILE_IDENTIFIER!r}: not a .pte file")
    if size < 16 or bytes(data[8:12]) != HEADER_MAGIC:
        return None
    length = struct.unpack_from("<I", data, 12)[0]
    if length < _HEADER_MIN or 8 + length > size:
        fail("extended_header.length", f"{length}: an eh00 header is at least {_HEADER_MIN} bytes and inside the file")
    program_size, base = struct.unpack_from("<QQ", data, 16)
    seg_size = struct.unpack_from("<Q", data, 32)[0] if length >= 32 else None
    if program_size > size or program_size < 8 + length:
        fail("extended_header.program_size", f"{program_size} does not fit the file ({size} bytes)")
    if base and (base < program_size or base > size):
        fail("extended_header.segment_base_offset", f"{base} is not between the program's end ({program_size}) and the file's ({size})")
    if seg_size is not None and base and base + seg_size > size:
        fail("extended_header.segment_data_size", f"{seg_size} bytes from {base} run past the file's end ({size})")
    return {"length": length, "program_size": program_size, "segment_base_offset": base, "segment_data_size": seg_size}


def read_pte(source, name: str | None = None, *, detail: bool = False) -> dict:
    """The summary of a ``.pte`` given as a path or its bytes; ``Pt2FormatError`` when malformed,
    ``Pt2UsageError`` when the path cannot be read. Of a file only the flatbuffer is read (its
    size from the extended header): the segments (weights) are checked against the file's size.

    ``detail``: each execution plan also lists every value (``values``: the summary of each, a
    list's ``item_values``, a scalar's ``value``, a tensor's ``memory`` and ``nbytes``) and every instruction of each chain
    (``instructions``: ``chain``, ``kind``, ``operator`` or ``delegate``, ``args``), as checked."""
    with extra_required("reading a .pte", "flatbuffers", "pte"):
        import flatbuffers  # noqa: F401  (the generated module needs it)
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        header = _header(data, len(data))
        summary = _summary(data[:header["program_size"]] if header else data, len(data), name or "<bytes>", header, detail)
        base = header["segment_base_offset"] if header else 0
        return _with_external_blobs(summary, lambda off, n: data[base + off: base + off + n])
    try:
        with open(source, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            header = _header(f.read(_HEAD_BYTES), size)
            end = header["program_size"] if header else size
            if end > MAX_FLATBUFFER:
                fail("file", f"a {end}-byte flatbuffer, past flatbuffers' 2 GiB limit")
            f.seek(0)
            data = f.read(end)
    except OSError as e:
        from ...serde.errors import Pt2UsageError

        raise Pt2UsageError(f"cannot read {source}: {(e.strerror or str(e)).lower()}") from None
    if len(data) != end:
        fail("file", "the file changed while it was read")
    summary = _summary(data, size, name or str(source), header, detail)
    base = header["segment_base_offset"] if header else 0

    def read(off: int, n: int) -> bytes:
        with open(source, "rb") as f:
            f.seek(base + off)
            return f.read(n)

    return _with_external_blobs(summary, read)


def _with_external_blobs(summary: dict, read) -> dict:
    """Each plan's ``external_blobs``: the keys its XNNPACK delegates read that the file's named
    data lacks (``delegate_reader``), found in the ``.ptd`` at run time."""
    named = {e["key"] for e in summary["named_data"]}
    for k, plan in enumerate(summary["execution_plans"]):
        plan["external_blobs"] = external_blobs(k, plan, summary["segments"], named, read)
    return summary


def _summary(data: bytes, size: int, name: str, header, detail: bool = False) -> dict:
    c = Checked(data, len(data))
    where = ["program"]
    try:
        return _read(c, size, name, header, where, detail)
    except Pt2FormatError:
        raise
    except (struct.error, IndexError, ValueError, TypeError, OverflowError) as e:
        # a read the checks did not foresee: still the file's fault, named by the field being read
        raise Pt2FormatError(f"malformed flatbuffer ({type(e).__name__}: {e})", path=where[0]) from None


def _read(c: Checked, size: int, name: str, header, where: list, detail: bool = False) -> dict:
    from . import schema_generated as fb

    root = c.u32(0, "root")
    program = fb.Program()
    program.Init(c.buf, root)
    c.table(program._tab, "program")
    version = program.Version()
    segments = []
    for i in range(c.vector(program._tab, _SLOT["segments"], 4, "segments", MAX_PLANS)):
        p = f"segments[{i}]"
        where[0] = p
        seg = program.Segments(i)
        c.table(seg._tab, p)
        segments.append({"offset": seg.Offset(), "size": seg.Size()})
    seg_room = (size - header["segment_base_offset"]) if header and header["segment_base_offset"] else 0
    for i, s in enumerate(segments):
        if s["offset"] + s["size"] > seg_room:
            fail(f"segments[{i}]", f"offset {s['offset']} + size {s['size']} runs past the file's segment data ({seg_room} bytes)")
    constant_buffers = []
    for i in range(c.vector(program._tab, _SLOT["constant_buffer"], 4, "constant_buffer", MAX_VALUES)):
        p = f"constant_buffer[{i}]"
        where[0] = p
        buf = program.ConstantBuffer(i)
        c.table(buf._tab, p)
        constant_buffers.append({"index": i, "bytes": c.vector(buf._tab, _BUFFER_STORAGE, 1, f"{p}.storage", 1 << 62),
                                 "location": "inline"})
    inline_delegate_data = []
    for i in range(c.vector(program._tab, _SLOT["backend_delegate_data"], 4, "backend_delegate_data", MAX_VALUES)):
        p = f"backend_delegate_data[{i}]"
        d = program.BackendDelegateData(i)
        c.table(d._tab, p)
        inline_delegate_data.append(c.vector(d._tab, _INLINE_DATA, 1, f"{p}.data", 1 << 62))
    n_constants = len(constant_buffers)
    where[0] = "constant_segment"
    if c.target(program._tab, _SLOT["constant_segment"], "constant_segment") is not None:
        cs = program.ConstantSegment()
        c.table(cs._tab, "constant_segment")
        seg_index = cs.SegmentIndex()
        offsets = c.vector_values(cs._tab, _SUBSEGMENT_OFFSETS, "Q", "constant_segment.offsets", MAX_VALUES)
        if offsets:
            if seg_index >= len(segments):
                fail("constant_segment.segment_index", f"segment {seg_index} does not exist (the file has {len(segments)})")
            seg_size = segments[seg_index]["size"]
            for i, off in enumerate(offsets):
                if off > seg_size:
                    fail(f"constant_segment.offsets[{i}]", f"{off} is past its segment's end ({seg_size} bytes)")
            # buffer i spans to the next one's offset (or the segment's end); entry 0 is reserved
            constant_buffers = [{"index": i, "bytes": (offsets[i + 1] if i + 1 < len(offsets) else seg_size) - off,
                                 "location": f"segment {seg_index}"}
                                for i, off in enumerate(offsets) if i > 0]
            n_constants = len(offsets)
    n_mutable = []  # per mutable_data_segments entry: its buffers (entry 0 reserved)
    for i in range(c.vector(program._tab, _SLOT["mutable_data_segments"], 4, "mutable_data_segments", MAX_PLANS)):
        p = f"mutable_data_segments[{i}]"
        m = program.MutableDataSegments(i)
        c.table(m._tab, p)
        n_mutable.append(c.vector(m._tab, _SUBSEGMENT_OFFSETS, 8, f"{p}.offsets", MAX_VALUES))
        if n_mutable[-1] and m.SegmentIndex() >= len(segments):
            fail(f"{p}.segment_index", f"segment {m.SegmentIndex()} does not exist (the file has {len(segments)})")
    named_data = []
    for i in range(c.vector(program._tab, _SLOT["named_data"], 4, "named_data", MAX_VALUES)):
        p = f"named_data[{i}]"
        where[0] = p
        entry = program.NamedData(i)
        c.table(entry._tab, p)
        key = c.string(entry._tab, _NAMED_DATA_KEY, f"{p}.key")
        named_data.append({"key": key, "segment": c.index(entry.SegmentIndex(), len(segments), "segment",
                                                           f"{p}.segment_index")})
    plans = []
    for k in range(c.vector(program._tab, _SLOT["execution_plan"], 4, "execution_plan", MAX_PLANS)):
        p = f"execution_plan[{k}]"
        where[0] = p
        plan = program.ExecutionPlan(k)
        c.table(plan._tab, p)
        plans.append(_plan(c, fb, plan, p, (n_constants, n_mutable), len(segments), len(inline_delegate_data), where,
                           detail))
    return {
        "file": name,
        "kind": "executorch-program",
        "file_identifier": FILE_IDENTIFIER.decode(),
        "schema_version": version,
        "extended_header": header,
        "size": size,
        "execution_plans": plans,
        "segments": segments,
        "constant_buffers": constant_buffers,
        "constant_bytes": sum(b["bytes"] for b in constant_buffers),
        "backend_delegate_data": inline_delegate_data,
        "named_data": named_data,
    }


@functools.lru_cache(maxsize=1)
def _dtype_names(fb) -> dict:
    return {v: k for k, v in vars(fb.ScalarType).items() if k.isupper()}


def _tensor(c: Checked, fb, val, p: str, data_buffers: tuple, n_buffers: int, buffer_sizes: list,
            detail: bool = False) -> dict:
    """One tensor; ``data_buffers``: the constant buffers' count and each mutable data segment's
    (a planned tensor's ``data_buffer_idx`` names its initial value in the mutable one)."""
    t = fb.Tensor()
    t.Init(val.Bytes, val.Pos)
    dtype = t.ScalarType()
    if dtype not in _ELEMENT_BYTES:
        fail(f"{p}.scalar_type", f"{dtype} is not an ExecuTorch scalar type")
    sizes = c.vector_values(t._tab, _TENSOR_SLOT["sizes"], "i", f"{p}.sizes", MAX_RANK)
    if any(s < 0 for s in sizes):
        fail(f"{p}.sizes", f"{sizes}: a negative size")
    c.vector(t._tab, _TENSOR_SLOT["dim_order"], 1, f"{p}.dim_order", MAX_RANK)
    dyn = t.ShapeDynamism()
    if dyn not in _DYNAMISM:
        fail(f"{p}.shape_dynamism", f"{dyn} is not a TensorShapeDynamism")
    key = _external_key(c, t, p)
    buffer = t.DataBufferIdx()
    planned = c.target(t._tab, _TENSOR_SLOT["allocation_info"], f"{p}.allocation_info") is not None
    mutable_segment = 0
    if c.target(t._tab, _TENSOR_SLOT["extra_tensor_info"], f"{p}.extra_tensor_info") is not None:
        mutable_segment = t.ExtraTensorInfo().MutableDataSegmentsIdx()  # the table checked by _external_key
    n_constants, n_mutable = data_buffers
    if key is None and buffer and not planned and buffer >= n_constants:  # an external tensor's index is not read
        fail(f"{p}.data_buffer_idx", f"constant buffer {buffer} does not exist (the file has {n_constants})")
    if buffer and planned and (mutable_segment >= len(n_mutable) or buffer >= n_mutable[mutable_segment]):
        fail(f"{p}.data_buffer_idx", f"initial value {buffer} of a mutable tensor does not exist (mutable data "
                                      f"segment {mutable_segment} of {len(n_mutable)})")
    memory = None
    if planned:
        a = t.AllocationInfo()
        c.table(a._tab, f"{p}.allocation_info")
        if not 0 < a.MemoryId() < n_buffers:
            fail(f"{p}.allocation_info.memory_id", f"{a.MemoryId()} is not a planned buffer (non_const_buffer_sizes has {n_buffers})")
        numel = 1
        for s in sizes:
            numel *= s
        memory = [a.MemoryId(), a.MemoryOffsetHigh() << 32 | a.MemoryOffsetLow()]
        end = memory[1] + numel * _ELEMENT_BYTES[dtype]
        if end > buffer_sizes[a.MemoryId()]:
            fail(f"{p}.allocation_info", f"the tensor ends at {end}, past its buffer's {buffer_sizes[a.MemoryId()]} bytes")
    dtype_name = _dtype_names(fb).get(dtype, str(dtype))
    out = {"kind": "Tensor", "dtype": dtype_name, "sizes": sizes, "shape_dynamism": _DYNAMISM[dyn],
           "dynamic": dyn != 0, "constant": (bool(buffer) and not planned) or key is not None}
    if key is not None:
        out["external"] = key
    if detail:
        numel = 1
        for size in sizes:
            numel *= size
        out["memory"] = memory  # [memory id, offset] of a planned tensor, else None
        out["nbytes"] = numel * _ELEMENT_BYTES[dtype]
    return out


def _external_key(c: Checked, t, p: str) -> str | None:
    """The key of a tensor whose data is in a .ptd (``extra_tensor_info.location == EXTERNAL``)."""
    if c.target(t._tab, _TENSOR_SLOT["extra_tensor_info"], f"{p}.extra_tensor_info") is None:
        return None
    extra = t.ExtraTensorInfo()
    c.table(extra._tab, f"{p}.extra_tensor_info")
    key = c.string(extra._tab, _EXTRA_SLOT["fully_qualified_name"], f"{p}.extra_tensor_info.fully_qualified_name")
    if extra.Location() != _EXTERNAL:
        return None
    if not key:
        fail(f"{p}.extra_tensor_info.fully_qualified_name", "an external tensor with no key")
    return key


_SCALARS = {"Int": ("Int", "IntVal"), "Bool": ("Bool", "BoolVal"), "Double": ("Double", "DoubleVal")}


def _plan(c: Checked, fb, plan, p: str, data_buffers: tuple, n_segments: int, n_inline: int, where: list,
          detail: bool = False) -> dict:
    name = c.string(plan._tab, _PLAN_SLOT["name"], f"{p}.name")
    buffer_sizes = c.vector_values(plan._tab, _PLAN_SLOT["non_const_buffer_sizes"], "q", f"{p}.non_const_buffer_sizes", MAX_PLANS)
    if any(s < 0 for s in buffer_sizes):
        fail(f"{p}.non_const_buffer_sizes", f"{buffer_sizes}: a negative size")
    n_values = c.vector(plan._tab, _PLAN_SLOT["values"], 4, f"{p}.values", MAX_VALUES)
    values = []
    lists = []  # (path, items, optional) checked once every value is known
    for i in range(n_values):
        vp = f"{p}.values[{i}]"
        where[0] = vp
        ev = plan.Values(i)
        c.table(ev._tab, vp)
        kind = _KINDS.get(ev.ValType())
        if kind is None:
            fail(f"{vp}.val_type", f"{ev.ValType()} is not an EValue kind")
        if kind == "Null":
            values.append({"kind": "Null"})
            continue
        if c.target(ev._tab, 6, f"{vp}.val") is None:
            fail(f"{vp}.val", f"a {kind} with no value")
        val = ev.Val()
        c.table(val, f"{vp}.val")
        if kind == "Tensor":
            values.append(_tensor(c, fb, val, f"{vp}.val", data_buffers, len(buffer_sizes), buffer_sizes, detail))
        elif kind in ("IntList", "TensorList", "OptionalTensorList"):
            fmt = "q" if kind == "IntList" else "i"
            items = c.vector_values(val, _ITEMS, fmt, f"{vp}.val.items", MAX_VALUES)
            lists.append((f"{vp}.val.items", items, kind == "OptionalTensorList"))
            values.append({"kind": kind, "items": len(items)} | ({"item_values": items} if detail else {}))
        elif kind in ("DoubleList", "BoolList"):
            values.append({"kind": kind, "items": c.vector(val, _ITEMS, 8 if kind == "DoubleList" else 1,
                                                            f"{vp}.val.items", MAX_VALUES)})
        elif kind == "String":
            s = fb.String()
            s.Init(val.Bytes, val.Pos)
            values.append({"kind": kind, "value": c.string(s._tab, 4, f"{vp}.val.string_val")})
        elif detail and kind in _SCALARS:
            table, getter = _SCALARS[kind]
            scalar = getattr(fb, table)()
            scalar.Init(val.Bytes, val.Pos)
            values.append({"kind": kind, "value": getattr(scalar, getter)()})
        else:
            values.append({"kind": kind})
    for lp, items, optional in lists:
        for j, x in enumerate(items):
            c.index(x, n_values, "value", f"{lp}[{j}]", optional)
    external = [{"key": v["external"], "dtype": v["dtype"], "sizes": v["sizes"], "value": i}
                for i, v in enumerate(values) if "external" in v]
    ios = {}
    for io in ("inputs", "outputs"):
        idx = c.vector_values(plan._tab, _PLAN_SLOT[io], "i", f"{p}.{io}", MAX_VALUES)
        ios[io] = [dict(values[c.index(x, n_values, "value", f"{p}.{io}[{j}]")], index=x) for j, x in enumerate(idx)]
    operators = []
    for i in range(c.vector(plan._tab, _PLAN_SLOT["operators"], 4, f"{p}.operators", MAX_VALUES)):
        op = plan.Operators(i)
        c.table(op._tab, f"{p}.operators[{i}]")
        op_name = c.string(op._tab, _OPERATOR_SLOT["name"], f"{p}.operators[{i}].name")
        if not op_name:
            fail(f"{p}.operators[{i}].name", "an operator with no name")
        overload = c.string(op._tab, _OPERATOR_SLOT["overload"], f"{p}.operators[{i}].overload") or ""
        operators.append(f"{op_name}.{overload}" if overload else op_name)
    delegates = []
    for i in range(c.vector(plan._tab, _PLAN_SLOT["delegates"], 4, f"{p}.delegates", MAX_VALUES)):
        dp = f"{p}.delegates[{i}]"
        d = plan.Delegates(i)
        c.table(d._tab, dp)
        delegate_id = c.string(d._tab, _DELEGATE_SLOT["id"], f"{dp}.id")
        if c.target(d._tab, _DELEGATE_SLOT["processed"], f"{dp}.processed") is None:
            fail(f"{dp}.processed", "a delegate with no processed data")
        ref = d.Processed()
        c.table(ref._tab, f"{dp}.processed")
        count = {0: n_inline, 1: n_segments}.get(ref.Location())
        if count is None:
            fail(f"{dp}.processed.location", f"{ref.Location()} is not a DataLocation")
        if ref.Index() >= count:
            fail(f"{dp}.processed.index", f"{ref.Index()} is out of range ({count} {'inline blobs' if ref.Location() == 0 else 'segments'})")
        c.vector(d._tab, _DELEGATE_SLOT["compile_specs"], 4, f"{dp}.compile_specs", MAX_PLANS)
        delegates.append({"id": delegate_id, "location": "inline" if ref.Location() == 0 else "segment", "index": ref.Index()})
    counts = {op: 0 for op in operators}
    kinds = {k: 0 for k in _INSTRUCTIONS.values()}
    delegate_calls = 0
    n_instructions = 0
    instructions = []
    for ci in range(c.vector(plan._tab, _PLAN_SLOT["chains"], 4, f"{p}.chains", MAX_PLANS)):
        cp = f"{p}.chains[{ci}]"
        where[0] = cp
        chain = plan.Chains(ci)
        c.table(chain._tab, cp)
        for io in ("inputs", "outputs"):
            for j, x in enumerate(c.vector_values(chain._tab, _CHAIN_SLOT[io], "i", f"{cp}.{io}", MAX_VALUES)):
                c.index(x, n_values, "value", f"{cp}.{io}[{j}]")
        n = c.vector(chain._tab, _CHAIN_SLOT["instructions"], 4, f"{cp}.instructions", MAX_INSTRUCTIONS)
        n_instructions += n
        for j in range(n):
            ip = f"{cp}.instructions[{j}]"
            where[0] = ip
            ins = chain.Instructions(j)
            c.table(ins._tab, ip)
            kind = _INSTRUCTIONS.get(ins.InstrArgsType())
            if kind is None:
                fail(f"{ip}.instr_args_type", f"{ins.InstrArgsType()} is not an instruction kind")
            if c.target(ins._tab, 6, f"{ip}.instr_args") is None:
                fail(f"{ip}.instr_args", f"a {kind} with no arguments")
            args = c.table(ins.InstrArgs(), f"{ip}.instr_args")
            kinds[kind] += 1
            if kind in ("KernelCall", "DelegateCall"):
                call = fb.KernelCall() if kind == "KernelCall" else fb.DelegateCall()
                call.Init(args.Bytes, args.Pos)
                target = call.OpIndex() if kind == "KernelCall" else call.DelegateIndex()
                field = "op_index" if kind == "KernelCall" else "delegate_index"
                c.index(target, len(operators) if kind == "KernelCall" else len(delegates),
                        "operator" if kind == "KernelCall" else "delegate", f"{ip}.instr_args.{field}")
                call_args = c.vector_values(args, _CALL_ARGS, "i", f"{ip}.instr_args.args", MAX_VALUES)
                for a, x in enumerate(call_args):
                    c.index(x, n_values, "value", f"{ip}.instr_args.args[{a}]")
                if kind == "KernelCall":
                    counts[operators[target]] += 1
                else:
                    delegate_calls += 1
                if detail:
                    what = {"operator": operators[target]} if kind == "KernelCall" else {"delegate": delegates[target]["id"]}
                    instructions.append({"chain": ci, "kind": kind, **what, "args": call_args})
            elif kind == "MoveCall":
                call = fb.MoveCall()
                call.Init(args.Bytes, args.Pos)
                c.index(call.MoveFrom(), n_values, "value", f"{ip}.instr_args.move_from")
                c.index(call.MoveTo(), n_values, "value", f"{ip}.instr_args.move_to")
                if detail:
                    instructions.append({"chain": ci, "kind": kind, "args": [call.MoveFrom(), call.MoveTo()]})
            elif kind == "JumpFalseCall":
                call = fb.JumpFalseCall()
                call.Init(args.Bytes, args.Pos)
                c.index(call.CondValueIndex(), n_values, "value", f"{ip}.instr_args.cond_value_index")
                _jump_destination(call.DestinationInstruction(), n, f"{ip}.instr_args.destination_instruction")
                if detail:
                    instructions.append({"chain": ci, "kind": kind, "args": [call.CondValueIndex()],
                                         "destination": call.DestinationInstruction()})
            else:
                call = fb.FreeCall()
                call.Init(args.Bytes, args.Pos)
                c.index(call.ValueIndex(), n_values, "value", f"{ip}.instr_args.value_index")
                if detail:
                    instructions.append({"chain": ci, "kind": kind, "args": [call.ValueIndex()]})
    out = {"name": name, "inputs": ios["inputs"], "outputs": ios["outputs"], "value_count": n_values,
           "instruction_count": n_instructions, "instructions": kinds, "operators": counts, "delegates": delegates,
           "delegate_calls": delegate_calls, "non_const_buffer_sizes": buffer_sizes,
           "external_tensors": external}
    if detail:
        out |= {"values": values, "instruction_list": instructions}
    return out


def _jump_destination(dest: int, n: int, path: str) -> None:
    """A ``JumpFalseCall``'s destination: an instruction of its chain, or ``n``, the chain's end
    (exir jumps there past a ``cond`` that ends the chain)."""
    if not 0 <= dest <= n:
        fail(path, f"instruction index {dest} is out of range (the chain has {n} instructions; {n} is its end)")
