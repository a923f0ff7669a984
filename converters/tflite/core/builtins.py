"""The one table of TFLite builtins the passes read: ``BUILTINS[code]`` says, per builtin,

- ``arity``: how many data operands an elementwise builtin reads (1 unary, 2 binary, 3 select;
  None: not elementwise);
- ``layout_agnostic``: whether the layout pass (``passes/optimize_layout.py``) moves transposes through it (each
  output element comes from the same element of its operands, so it runs in any layout);
  the elementwise builtins not marked are left where the mappers put them;
- ``shape``: the kind of static-shape rule ``shapes.py`` applies: ``"same"`` (the first
  operand's), ``"broadcast"`` (numpy broadcasting of all operands), ``"reduce"`` (an axes
  operand, ``keep_dims``), ``"own"`` (a rule of its own in ``shapes.py``), None (unshaped);
- ``xnnpack``: for an elementwise builtin, whether ai-edge-litert 2.3.0's XNNPACK delegate takes
  it on float32 operands (measured: ``tests/converters/tflite/test_tflite_builtins.py`` runs each
  one alone and reads whether it became a DELEGATE node; LEAKY_RELU with its alpha, CAST from
  float32 to int32); None where not measured (the rest: XNNPACK's choice also depends on their
  options and constant operands);
- ``reduction``: a reduction of numbers over a constant axes operand (MEAN, SUM, REDUCE_MAX,
  REDUCE_MIN, REDUCE_PROD; not the boolean REDUCE_ANY/REDUCE_ALL), which the layout pass moves
  transposes through with its axes remapped and ``passes/drop_squeezing_reshapes.py`` turns into one without
  keep_dims (``REDUCTIONS``, the set of them);
- ``options``: the BuiltinOptions table an operator of this code is written with when its maker
  gives none (``default_options``: ADD, SUB, MUL and DIV take their options table with no fused
  activation, ``emit.Emitter.op`` fills it in);
- ``integer_types(code)``: what integer tensors it may take, read from ``int_compute.py``,
  which stays the source of truth for dtypes (the rule there is applied as each op is emitted).

``broadcast`` is the one numpy-broadcasting of shapes with -1 for run-time dims.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import int_compute

__all__ = ["Builtin", "BUILTINS", "REDUCTIONS", "broadcast", "default_options", "integer_types"]


@dataclass(frozen=True)
class Builtin:
    arity: int | None = None
    layout_agnostic: bool = False
    shape: str | None = None
    xnnpack: bool | None = None
    options: str | None = None
    reduction: bool = False


_UNARY_AGNOSTIC = ("RELU", "RELU6", "LOGISTIC", "TANH", "EXP", "ABS", "NEG", "GELU", "HARD_SWISH", "LEAKY_RELU",
                   "ELU", "SQRT", "RSQRT", "LOG", "SIN", "COS", "FLOOR", "CEIL", "CAST", "SIGN")
_UNARY_OTHER = ("ROUND", "LOGICAL_NOT", "BITCAST", "ZEROS_LIKE")  # elementwise, not moved through yet
_SAME_SHAPE = ("SOFTMAX", "LOG_SOFTMAX", "CUMSUM", "PRELU")  # along an axis, or a per-channel operand
_BINARY_AGNOSTIC = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM")
_BINARY_OTHER = ("POW", "FLOOR_DIV", "FLOOR_MOD", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER",
                 "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "ATAN2", "SQUARED_DIFFERENCE")
_NUMERIC_REDUCE = ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD")
_BOOL_REDUCE = ("REDUCE_ANY", "REDUCE_ALL")
_OWN_RULE = ("TRANSPOSE", "PAD", "PADV2", "MIRROR_PAD", "CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D",
             "AVERAGE_POOL_2D", "TRANSPOSE_CONV", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "RESHAPE",
             "EXPAND_DIMS", "SQUEEZE", "FULLY_CONNECTED", "BATCH_MATMUL", "CONCATENATION", "GATHER",
             "STRIDED_SLICE", "SHAPE")

_ARITHMETIC_OPTIONS = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions", "DIV": "DivOptions"}

_XNNPACK = frozenset({"ABS", "ADD", "CEIL", "COS", "DIV", "ELU", "EXP", "FLOOR", "GELU", "HARD_SWISH", "LEAKY_RELU",
                       "LOG", "LOGISTIC", "MAXIMUM", "MINIMUM", "MUL", "NEG", "RELU", "RELU6", "ROUND", "RSQRT",
                       "SIN", "SQRT", "SQUARED_DIFFERENCE", "SUB", "TANH"})

BUILTINS: dict[str, Builtin] = {
    **{c: Builtin(1, True, "same", c in _XNNPACK) for c in _UNARY_AGNOSTIC},
    **{c: Builtin(1, False, "same", c in _XNNPACK) for c in _UNARY_OTHER},
    **{c: Builtin(None, False, "same") for c in _SAME_SHAPE},
    **{c: Builtin(2, True, "broadcast", c in _XNNPACK, _ARITHMETIC_OPTIONS.get(c)) for c in _BINARY_AGNOSTIC},
    **{c: Builtin(2, False, "broadcast", c in _XNNPACK) for c in _BINARY_OTHER},
    "SELECT_V2": Builtin(3, False, "broadcast", False),
    # per-tensor QUANTIZE/DEQUANTIZE at the edges of the QDQ pass's int8 regions (qdq_pass.py)
    # map each element alone; per-channel ones read constants, which the layout pass never moves
    "QUANTIZE": Builtin(1, True, "same"), "DEQUANTIZE": Builtin(1, True, "same"),
    **{c: Builtin(None, False, "reduce", reduction=True) for c in _NUMERIC_REDUCE},
    **{c: Builtin(None, False, "reduce") for c in _BOOL_REDUCE},
    **{c: Builtin(None, False, "own") for c in _OWN_RULE},
}

REDUCTIONS = frozenset(c for c, b in BUILTINS.items() if b.reduction)


def default_options(code: str) -> tuple[str, dict] | None:
    """``(options table, fields)`` for an operator of ``code`` made without options: ADD, SUB,
    MUL and DIV with no fused activation (the writer writes the table, empty); None for others."""
    b = BUILTINS.get(code)
    return None if b is None or b.options is None else (b.options, {"fused_activation_function": 0})


def integer_types(code: str) -> str:
    """What ``int_compute`` lets ``code`` take: "exact narrow" (8/16-bit as they are), "int32"
    (8/16-bit widened to its int32 kernel), "clamp" (rewritten as MAXIMUM/MINIMUM), "float only"
    (an integer data operand is refused) or "int32/int64 only" (8/16-bit refused)."""
    if code in int_compute.CLAMP_OF:
        return "clamp"
    if code in int_compute.NO_INT32_KERNEL:
        return "float only"
    if code in int_compute.EXACT_NARROW:
        return "exact narrow"
    if code in int_compute.INT32_KERNEL:
        return "int32"
    return "int32/int64 only"


def broadcast(*shapes):
    """numpy broadcasting of ``shapes`` (lists of ints, -1 for a dim known only at run time; None
    for an unknown rank, which makes the result None). A -1 against a known dim other than 1 is
    that dim (broadcasting allows nothing else)."""
    if any(s is None for s in shapes):
        return None
    out: list = []
    for s in shapes:
        n = max(len(out), len(s))
        a, b = [1] * (n - len(out)) + list(out), [1] * (n - len(s)) + list(s)
        out = [y if x == 1 else x if y == 1 else x if x == y else max(x, y) for x, y in zip(a, b)]
    return out
