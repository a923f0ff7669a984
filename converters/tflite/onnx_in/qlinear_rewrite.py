"""ONNX's integer operators (``QLinearConv``, ``QLinearMatMul``, ``ConvInteger``,
``MatMulInteger``) rewritten into plain ONNX operators that compute them exactly, before the
mappers run (called from ``normalise``).

The integer accumulation ``acc = Σ (x − x_zp)·(w − w_zp) + B`` is computed by a float32
``Conv``/``MatMul`` of the zero-point-shifted operands: every product and partial sum is an
integer, exact in float32 while ``Σ |x − x_zp|·|w − w_zp|`` stays below 2^24. That bound is
checked statically for each output channel (from the weights' values where they are constants,
else from the kernel size and the types' ranges). Where the whole sum may pass it, the reduced
channels (Conv's input channels, MatMul's K) are cut into runs that each stay below it: one
float32 Conv/MatMul per run (``Slice`` of both operands), cast to int32 and added in int32 with
the bias, so the int32 sum is exact up to 2^31. A single channel whose sum may reach 2^24 (a
kernel of more than 258 taps of run-time 8-bit weights) and a grouped convolution that would
need runs are refused.

``ConvInteger``/``MatMulInteger`` cast the exact sum to int32. ``QLinear*`` requantize as onnx's
reference does: ``y = saturate(round_half_even(acc · (x_scale·w_scale / y_scale) + y_zp))``, the
multiplier computed in the scales' own type (float16/bfloat16 rounding kept after each
operation) and the product ``acc · M`` in float32, where onnx's reference multiplies in float64
(the operator's spec leaves the precision open; ONNX Runtime multiplies in float32 too, and
converts an int32 sum past 2^24 to float32 as done here).

Refused (``Unsupported`` naming the node): a non-scalar input scale or zero point (per-row
quantization of ``x``/``a``), scales not all of one float type, a zero point of another type than
its operand, a bias other than int32, an attribute outside the schema, a per-axis weight scale or
zero point whose length is not the output channels' (Conv) or columns' (MatMul), a reduction
length the shapes do not give, one channel's sum that may reach 2^24, a grouped convolution that
would need runs, and a whole sum that may pass int32. The int8 kernels of the QDQ pass
are not used for these ops: they run in float32, exactly.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

from ...errors import Unsupported
from ...onnx.graph_tools import attrs
from ...onnx.lazy_initializers import array_of
from ...report import Problems
from ..core.op_attributes import ATTRIBUTES

__all__ = ["INTEGER_OPS", "rewrite_integer_ops"]

_EXACT = 1 << 24  # float32 holds every integer below this
_RANGES = {TensorProto.UINT8: (0, 255), TensorProto.INT8: (-128, 127)}
_SCALE_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16)
_CONV_ATTRS = tuple(ATTRIBUTES["Conv"])  # QLinearConv/ConvInteger have Conv's: the Conv node is given them


class _Graph:
    """What the rewrite reads of the model: constants, element types and static shapes."""

    def __init__(self, m: onnx.ModelProto):
        g = m.graph
        self.consts = {t.name: array_of(t) for t in g.initializer}
        for n in g.node:
            if n.op_type == "Constant" and n.output and n.attribute and n.attribute[0].name == "value":
                self.consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
        self.types = {}
        try:
            inferred = shape_inference.infer_shapes(_skeleton(m))
        except Exception:  # noqa: BLE001 - the strict inference after the rewrite names what is wrong
            inferred = m
        for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
            tt = vi.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim] \
                if tt.HasField("shape") else None
            self.types[vi.name] = (tt.elem_type, dims)
        for t in g.initializer:
            self.types[t.name] = (t.data_type, list(t.dims))
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def elem(self, name: str) -> int:
        if name in self.consts:
            return helper.np_dtype_to_tensor_dtype(self.consts[name].dtype)
        return self.types.get(name, (0, None))[0]

    def dims(self, name: str):
        if name in self.consts:
            return list(self.consts[name].shape)
        return self.types.get(name, (0, None))[1]

    def size(self, name: str):
        d = self.dims(name)
        return None if d is None or any(x is None for x in d) else int(np.prod(d, dtype=np.int64))

    def fresh(self, base: str, what: str) -> str:
        self.count += 1
        return f"{base}__{what}{self.count}"

    def add(self, op: str, inputs: list, base: str, what: str, **attrs) -> str:
        out = self.fresh(base, what)
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{base}/{what}", **attrs))
        return out

    def const(self, arr: np.ndarray, base: str, what: str) -> str:
        name = self.fresh(base, what)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name


def _skeleton(m: onnx.ModelProto) -> onnx.ModelProto:
    """``m`` without its weights' data (initializers as typed graph inputs): inference serialises
    what it is given, and reads only the initializers' types and dims."""
    c = onnx.ModelProto(ir_version=m.ir_version)
    c.opset_import.extend(m.opset_import)
    c.functions.extend(m.functions)
    g, src = c.graph, m.graph
    for field in ("node", "input", "output", "value_info"):
        getattr(g, field).extend(getattr(src, field))
    stated = {i.name for i in src.input}
    g.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                   for t in src.initializer if t.name not in stated)
    return c


def _opt(node, i: int) -> str:
    return node.input[i] if len(node.input) > i and node.input[i] else ""


def _float(g: _Graph, name: str, base: str) -> str:
    return g.add("Cast", [name], base, "f", to=TensorProto.FLOAT)


def _shifted(g: _Graph, q: str, zp: str, base: str, what: str, zp_shape=None) -> str:
    """``float32(q) − float32(zp)`` (exact: both are 8-bit integers), ``zp`` reshaped to broadcast."""
    f = _float(g, q, base)
    if not zp:
        return f
    z = _float(g, zp, base)
    if zp_shape is not None:
        z = g.add("Reshape", [z, g.const(np.asarray(zp_shape, np.int64), base, "shape")], base, "zp")
    return g.add("Sub", [f, z], base, what)


def _quant_type(node, g: _Graph, name: str, role: str) -> tuple[int, int]:
    elem = g.elem(name)
    if elem not in _RANGES:
        raise Unsupported(f"{node.op_type} with {role} of ONNX type {TensorProto.DataType.Name(elem)} "
                          "(only uint8 and int8)")
    return _RANGES[elem]


def _operand_bound(node, g: _Graph, q: str, zp: str, role: str) -> int:
    """The largest |q − zp| the operand can take (the zero point of the operand's own type)."""
    lo, hi = _quant_type(node, g, q, role)
    if zp and g.elem(zp) != g.elem(q):
        raise Unsupported(f"{node.op_type} with a {role} zero point of ONNX type "
                          f"{TensorProto.DataType.Name(g.elem(zp))}, not its operand's")
    if zp and zp in g.consts:
        z = g.consts[zp].astype(np.int64)
        return int(max(np.abs(lo - z).max(), np.abs(hi - z).max())) if z.size else hi - lo
    return hi - lo


def _scalar(node, g: _Graph, name: str, role: str) -> None:
    if name and g.size(name) != 1:
        raise Unsupported(f"{node.op_type} with a {role} of shape {g.dims(name)} (only per-tensor: one element)")


def _per_channel(node, g: _Graph, name: str, role: str, channels) -> bool:
    """True when ``name`` is per-channel (one value per output channel), False when per-tensor."""
    if not name:
        return False
    n = g.size(name)
    if n == 1:
        return False
    dims = g.dims(name)
    if dims is None or len(dims) != 1 or channels is None or n != channels:
        raise Unsupported(f"{node.op_type} with a {role} of shape {dims}: only one element or one per "
                          f"output channel ({channels})")
    return True


def _abs_sums(g: _Graph, w: str, wz: str, conv: bool):
    """``Σ |w − w_zp|`` per (output channel, reduced channel) of constant weights, else None."""
    if w not in g.consts or (wz and wz not in g.consts):
        return None
    wv = g.consts[w].astype(np.int64)
    zv = g.consts[wz].astype(np.int64) if wz else np.zeros((), np.int64)
    if zv.size > 1:
        zv = zv.reshape([-1] + [1] * (wv.ndim - 1) if conv else [-1])
    d = np.abs(wv - zv)
    if conv:  # [M, C, k...] -> [M, C]
        return d.reshape(d.shape[0], d.shape[1], -1).sum(axis=2)
    return d.reshape(-1, d.shape[-2], d.shape[-1]).max(axis=0).T  # [..., K, N] -> [N, K]


def _plan(node, g: _Graph, x_bound: int, w: str, wz: str, w_role: str, conv: bool, bias: str):
    """The reduced channels cut into runs whose every partial sum stays below 2^24 (each exact
    in float32; the runs are then added in int32), and whether the bias may join the one float
    sum; refused where one channel alone could reach 2^24 or the whole sum overflow int32."""
    w_range = _operand_bound(node, g, w, wz, w_role)
    dims = g.dims(w)
    n_chan = dims[1] if conv else dims[-2]
    taps = dims[2:] if conv else []
    if n_chan is None or any(t is None for t in taps):
        raise Unsupported(f"{node.op_type}: the reduction length is not static, so exactness in float32 "
                          "cannot be checked")
    sums = _abs_sums(g, w, wz, conv)
    if sums is None:
        sums = np.full((1, n_chan), int(np.prod(taps, dtype=np.int64)) * w_range, np.int64)
    b_bound = _bias_bound(node, g, bias)
    runs, lo, running = [], 0, np.zeros(sums.shape[0], np.int64)
    for c in range(n_chan):
        if x_bound * int((running + sums[:, c]).max()) >= _EXACT:
            if c == lo:
                raise Unsupported(f"{node.op_type}: one input channel's products can reach 2^24, where "
                                  "float32 accumulation is no longer exact")
            runs.append((lo, c))
            lo, running = c, np.zeros_like(running)
        running += sums[:, c]
    runs.append((lo, n_chan))
    total = x_bound * int(sums.sum(axis=1).max()) + b_bound
    if total >= 1 << 31:
        raise Unsupported(f"{node.op_type}: its integer sums can reach {total}, beyond int32")
    return runs, len(runs) == 1 and total < _EXACT


def _bias_bound(node, g: _Graph, bias: str) -> int:
    if not bias:
        return 0
    if g.elem(bias) != TensorProto.INT32:
        raise Unsupported(f"{node.op_type} with a bias B of ONNX type {TensorProto.DataType.Name(g.elem(bias))} "
                          "(int32 only)")
    if bias not in g.consts:
        raise Unsupported(f"{node.op_type} with a run-time bias B: its size bounds no float32 accumulation")
    return int(np.abs(g.consts[bias].astype(np.int64)).max()) if g.consts[bias].size else 0


def _int32_sum(g: _Graph, runs, one_run, xi: str, wi: str, axes, bias: str, base: str) -> str:
    """Σ over the runs of ``one_run(x part, w part)`` (each exact in float32), in int32, + B: int32."""
    acc = ""
    for lo, hi in runs:
        xp, wp = xi, wi
        if len(runs) > 1:
            starts, ends = (g.const(np.asarray([v], np.int64), base, "at") for v in (lo, hi))
            xp = g.add("Slice", [xi, starts, ends, g.const(np.asarray([axes[0]], np.int64), base, "ax")], base, "xpart")
            wp = g.add("Slice", [wi, starts, ends, g.const(np.asarray([axes[1]], np.int64), base, "ax")], base, "wpart")
        part = g.add("Cast", [one_run(xp, wp)], base, "part", to=TensorProto.INT32)
        acc = g.add("Add", [acc, part], base, "sum") if acc else part
    if bias:
        bshape = g.const(np.asarray([-1] + [1] * axes[2], np.int64), base, "shape")
        acc = g.add("Add", [acc, g.add("Reshape", [bias, bshape], base, "bias")], base, "biased")
    return acc


def _multiplier(g: _Graph, xs: str, ws: str, ys: str, scale_type: int, base: str) -> str:
    """``xs·ws/ys`` in the scales' type, as float32. A float16/bfloat16 one is computed as numpy
    and onnx's reference do: each operation in float32, rounded back to the type (exact: the
    product of two 11- or 8-bit significands fits float32's 24; the quotient's double rounding is
    innocuous as 24 ≥ 2·11 + 2); the Cast's mapper keeps that rounding in the file."""
    if scale_type == TensorProto.FLOAT:
        return g.add("Div", [g.add("Mul", [xs, ws], base, "sxw"), ys], base, "mult")

    def rounded(x: str) -> str:
        return _float(g, g.add("Cast", [x], base, "narrow", to=scale_type), base)

    p = rounded(g.add("Mul", [_float(g, xs, base), _float(g, ws, base)], base, "sxw"))
    return rounded(g.add("Div", [p, _float(g, ys, base)], base, "mult"))


def _requantize(g: _Graph, node, acc: str, xs: str, ws: str, ys: str, yz: str, base: str, m_shape) -> str:
    """``saturate(round_half_even(acc · (xs·ws/ys) + yz))`` in the type of ``yz``."""
    scale_type = g.elem(xs)
    if scale_type not in _SCALE_TYPES or any(g.elem(s) != scale_type for s in (ws, ys)):
        raise Unsupported(f"{node.op_type} with scales of ONNX types "
                          f"{[TensorProto.DataType.Name(g.elem(s)) for s in (xs, ws, ys)]} (one float type)")
    mf = _multiplier(g, xs, ws, ys, scale_type, base)
    if m_shape is not None:
        mf = g.add("Reshape", [mf, g.const(np.asarray(m_shape, np.int64), base, "shape")], base, "mult_c")
    r = g.add("Mul", [_float(g, acc, base), mf], base, "scaled")  # an int32 sum past 2^24 rounds here
    if yz:
        r = g.add("Add", [r, _float(g, yz, base)], base, "shifted")
    lo, hi = _quant_type(node, g, yz, "y_zero_point")
    r = g.add("Round", [r], base, "round")
    r = g.add("Clip", [r, g.const(np.float32(lo), base, "lo"), g.const(np.float32(hi), base, "hi")], base, "sat")
    return r


def _attrs(node, allowed: tuple) -> dict:
    """The node's attributes, each one its schema has (the Conv ones are handed to the Conv node,
    whose mapper reads or refuses each value); any other is refused."""
    out = attrs(node)
    for name in out:
        if name not in allowed:
            raise Unsupported(f"{node.op_type} attribute {name!r} (not in its schema)")
    return out


def _conv(g: _Graph, node, x, xz, w, wz, bias, base):
    w_dims, x_dims = g.dims(w), g.dims(x)
    if w_dims is None or len(w_dims) < 3 or x_dims is None:
        raise Unsupported(f"{node.op_type} with weights or input of unknown rank")
    rank = len(w_dims)
    _scalar(node, g, xz, "x_zero_point")
    per_channel = _per_channel(node, g, wz, "w_zero_point", w_dims[0])
    attrs = _attrs(node, _CONV_ATTRS)
    runs, float_bias = _plan(node, g, _operand_bound(node, g, x, xz, "x"), w, wz, "w", True, bias)
    if len(runs) > 1 and int(attrs.get("group", 1)) != 1:
        raise Unsupported(f"{node.op_type} with group={attrs['group']} whose sums can reach 2^24 (only "
                          "ungrouped convolutions are split over their input channels)")
    xi = _shifted(g, x, xz, base, "x_shift")
    wi = _shifted(g, w, wz, base, "w_shift", [-1] + [1] * (rank - 1) if per_channel else None)
    if float_bias:
        inputs = [xi, wi] + ([_float(g, bias, base)] if bias else [])
        return g.add("Conv", inputs, base, "conv", **attrs), rank
    return _int32_sum(g, runs, lambda xp, wp: g.add("Conv", [xp, wp], base, "conv", **attrs),
                      xi, wi, (1, 1, rank - 2), bias, base), rank


def _matmul(g: _Graph, node, a, az, b, bz, base):
    _attrs(node, ())
    a_dims, b_dims = g.dims(a), g.dims(b)
    if a_dims is None or b_dims is None or len(a_dims) < 2 or len(b_dims) < 2:
        raise Unsupported(f"{node.op_type} with operands of unknown rank or rank below 2 (vector products)")
    _scalar(node, g, az, "a_zero_point")
    _per_channel(node, g, bz, "b_zero_point", b_dims[-1])  # a 1-D one broadcasts along the columns as is
    runs, _ = _plan(node, g, _operand_bound(node, g, a, az, "a"), b, bz, "b", False, "")
    ai, bi = _shifted(g, a, az, base, "a_shift"), _shifted(g, b, bz, base, "b_shift")
    if len(runs) == 1:
        return g.add("MatMul", [ai, bi], base, "mm")
    return _int32_sum(g, runs, lambda ap, bp: g.add("MatMul", [ap, bp], base, "mm"),
                      ai, bi, (-1, -2, 0), "", base)


def _qlinear_conv(g: _Graph, node, base: str) -> str:
    x, xs, xz, w, ws, wz, ys, yz = (_opt(node, i) for i in range(8))
    bias = _opt(node, 8)
    _scalar(node, g, xs, "x_scale")
    _scalar(node, g, ys, "y_scale")
    _scalar(node, g, yz, "y_zero_point")
    acc, rank = _conv(g, node, x, xz, w, wz, bias, base)
    per_channel = _per_channel(node, g, ws, "w_scale", g.dims(w)[0])
    m_shape = [1, -1] + [1] * (rank - 2) if per_channel else None
    return _requantize(g, node, acc, xs, ws, ys, yz, base, m_shape)


def _qlinear_matmul(g: _Graph, node, base: str) -> str:
    a, as_, az, b, bs, bz, ys, yz = (_opt(node, i) for i in range(8))
    _scalar(node, g, as_, "a_scale")
    _scalar(node, g, ys, "y_scale")
    _scalar(node, g, yz, "y_zero_point")
    acc = _matmul(g, node, a, az, b, bz, base)
    _per_channel(node, g, bs, "b_scale", g.dims(b)[-1])
    return _requantize(g, node, acc, as_, bs, ys, yz, base, None)


def _conv_integer(g: _Graph, node, base: str) -> str:
    acc, _ = _conv(g, node, _opt(node, 0), _opt(node, 2), _opt(node, 1), _opt(node, 3), "", base)
    return acc


def _matmul_integer(g: _Graph, node, base: str) -> str:
    return _matmul(g, node, _opt(node, 0), _opt(node, 2), _opt(node, 1), _opt(node, 3), base)


# op -> (rewrite returning the float32 result, ONNX type of the output or None: that of input 7)
INTEGER_OPS = {
    "QLinearConv": (_qlinear_conv, None),
    "QLinearMatMul": (_qlinear_matmul, None),
    "ConvInteger": (_conv_integer, TensorProto.INT32),
    "MatMulInteger": (_matmul_integer, TensorProto.INT32),
}


def rewrite_integer_ops(m: onnx.ModelProto) -> onnx.ModelProto:
    """``m`` with each main-graph integer operator replaced by its exact float32 computation."""
    if not any(n.op_type in INTEGER_OPS and n.domain in ("", "ai.onnx") for n in m.graph.node):
        return m
    g = _Graph(m)
    problems = Problems("tflite")
    kept = []
    for node in m.graph.node:
        if node.op_type not in INTEGER_OPS or node.domain not in ("", "ai.onnx"):
            kept.append(node)
            continue
        rewrite, out_type = INTEGER_OPS[node.op_type]
        base = node.name or node.output[0]
        start = len(g.nodes)
        try:
            r = rewrite(g, node, f"{base}/{node.op_type}")
        except Unsupported as e:
            del g.nodes[start:]
            problems.add(f"ONNX {node.op_type}", base, str(e))
            continue
        elem = out_type if out_type is not None else g.elem(_opt(node, 7))
        g.nodes.append(helper.make_node("Cast", [r], [node.output[0]], name=f"{base}/{node.op_type}/out", to=elem))
        kept.extend(g.nodes[start:])
    problems.raise_if_any()
    out = onnx.ModelProto()
    out.CopyFrom(m)
    del out.graph.node[:]
    out.graph.node.extend(kept)
    out.graph.initializer.extend(g.inits)
    return out
