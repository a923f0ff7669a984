"""Schema 7.3 (torch 2.5) against 8.x: the one table of what a downgrade across the major respells.

Why: torch 2.5 wrote and reads schema 7.3, the other side of the file format's one major
break. Most of what 8.x added is handled by the generic walk (``serde.compat.target``), which
reads torch 2.5's snapshot: a field 7.3 lacks is dropped when it holds its default (warned or
blocked otherwise), and a union member or enum value 7.3 lacks (``as_sym_float``,
``as_complex``, ``parameter_mutation``, ``UINT16``...) is a blocker naming the field. What the
walk cannot do is a field that *both* schemas have but spell differently; those are the rows
of ``DIFFERENCES`` (facts from torch 2.5.1's ``torch/_export/serde/schema.py`` and
``serialize.py``, and 2.6's):

* ``as_none`` of ``Argument``, ``ConstantValue``, ``OptionalTensorArgument``: 7.3 declares
  ``Tuple[()]`` and writes ``[]`` (``Argument.create(as_none=())``); 8.x writes ``true``.
* ``RangeConstraint.min_val``/``max_val``: 7.3 declares ``int`` and writes an unbounded side as
  ``math.inf`` (``_sympy_int_to_int``), a bare ``-Infinity``/``Infinity`` JSON token that
  ``json.loads`` reads back and ``_int_to_sympy_int`` maps to ``int_oo``; 8.x writes ``null``.
* ``SymExpr.expr_str`` (same declared type, another spelling): torch 2.5 wrote ``str(expr)``
  (``s0``, ``2*s0 + 1``) and looks a lone symbol's range up by that text
  (``symbol_name_to_range.get(expr_str)``); 8.x writers print sympy ``srepr``
  (``Symbol('s77', positive=True, integer=True)``), which torch 2.5 parses but then finds no
  range for (``KeyError: s77`` when it loads). Respelled in infix from pt2x's own parse of the
  text (``codec.symbolic``; nothing is evaluated); a function torch 2.5's reader does not know
  (its ``sympy_functions`` table and sympy's own) has no 7.3 form. Text without ``Symbol(`` is
  already in the older form and kept.
* ``InputSpec.constant_input``: 7.3's ``ConstantInputSpec`` is 8.x's ``InputToConstantInputSpec``
  (same fields; type names are not in the JSON), and ``SymExprHint``'s members are declared in
  another order: no JSON change (rows kept so the table is the whole list).

Torch 2.5's writer also leaves out a field whose default is ``None`` while it is ``None``
(``_dataclass_to_dict``: e.g. ``Device.index``, ``ModuleCallEntry.signature``); its reader fills
the default back, so pt2x writes 7.3 the same way (``omitted``), and the file has the keys torch
2.5's own has.

Besides the JSON, torch 2.5 reads only the flat zip with a ``version`` member whose major is
``7`` (``torch.export.load`` compares it), the weights as ``torch.save`` pickles (it loads them
with ``weights_only=False``; pt2x writes only plain tensors), and no ``Node.is_hop_single_tensor_return``
(its higher-order-op outputs are torch 2.6's form). ``serde.compat.plan`` and ``node_forms`` do those.
No torch import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..codec.symbolic import Call, parse, to_infix
from ..errors import SymbolicExprError

__all__ = ["Difference", "DIFFERENCES", "RESPELLED", "NoForm", "MAJOR", "omitted"]

MAJOR = 7
"""The older schema major this table writes down to."""


class NoForm(Exception):
    """The value has no spelling in schema 7.3 (the message says why)."""


def _none_to_unit(v: Any) -> Any:
    if v is True or v == []:
        return []
    raise NoForm(f"{v!r}: schema 7.3 has only () (written []) for None")


def _bound(infinity: float) -> Callable[[Any], Any]:
    def respell(v: Any) -> Any:
        if v is None:
            return infinity
        if type(v) is int or (isinstance(v, float) and v == infinity):
            return v
        raise NoForm(f"{v!r}: schema 7.3 holds an int, or {infinity} for an unbounded side")

    return respell


SYMPY_NAMES_2_5 = frozenset({
    # torch 2.5's deserializer: sympify(expr_str, locals=sympy_functions), its table ...
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod", "CleanDiv", "CeilToInt", "FloorToInt", "CeilDiv",
    "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv", "IntTrueDiv", "IsNonOverlappingAndDenseIndicator",
    "TruncToFloat", "TruncToInt", "RoundToInt", "RoundDecimal", "ToFloat", "Identity",
    # ... and the sympy names sympify knows by itself that pt2x's parser reads
    "Max", "Min", "floor", "ceiling", "Abs", "Piecewise", "ExprCondPair", "Rational", "And", "Or", "Not",
    "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "Equality", "Unequality", "StrictLessThan", "LessThan",
    "StrictGreaterThan", "GreaterThan",
})
"""Function names in a shape expression that torch 2.5's reader resolves."""


def _functions(expr) -> set[str]:
    out, stack = set(), [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Call):
            out.add(node.func)
        stack.extend(node.children())
    return out


def _infix_expr(v: Any) -> Any:
    if type(v) is not str:
        raise NoForm(f"{type(v).__name__} where a shape expression's text belongs")
    try:
        expr = parse(v)  # also what is kept: torch sympifies (evals) the text, pt2x only parses it
    except SymbolicExprError as e:
        raise NoForm(f"shape expression outside pt2x's grammar: {e.reason}") from None
    if "Symbol(" not in v:
        return v  # str() text, as torch 2.5 and 2.6 wrote it
    unknown = sorted(_functions(expr) - SYMPY_NAMES_2_5)
    if unknown:
        raise NoForm(f"shape expression uses {', '.join(unknown)}, which torch 2.5's reader does not define")
    return to_infix(expr)


@dataclass(frozen=True)
class Difference:
    """One field that schema 7.3 and 8.x both have but declare differently."""

    where: str  # "Type.field"
    schema8: str  # how 8.x declares and writes it
    schema7: str  # how 7.3 declares and writes it
    to_7: Callable[[Any], Any] | None  # 8.x (or already 7.3) value -> 7.3 value; None: same JSON
    declared: bool = True  # False: both schemas declare it alike; the writers spell it differently


DIFFERENCES: tuple[Difference, ...] = (
    Difference("Argument.as_none", "bool, written true", "Tuple[()], written []", _none_to_unit),
    Difference("ConstantValue.as_none", "bool, written true", "Tuple[()], written []", _none_to_unit),
    Difference("OptionalTensorArgument.as_none", "bool, written true", "Tuple[()], written []", _none_to_unit),
    Difference("RangeConstraint.min_val", "Optional[int], unbounded: null", "int, unbounded: -Infinity (bare token)",
               _bound(-math.inf)),
    Difference("RangeConstraint.max_val", "Optional[int], unbounded: null", "int, unbounded: Infinity (bare token)",
               _bound(math.inf)),
    Difference("SymExpr.expr_str", "str: sympy srepr, Symbol('s0', positive=True, integer=True)",
               "str: str(expr), s0", _infix_expr, declared=False),
    Difference("InputSpec.constant_input", "InputToConstantInputSpec {name, value}",
               "ConstantInputSpec {name, value}", None),
    Difference("SymExprHint", "members as_int, as_bool, as_float", "members as_int, as_float, as_bool", None),
)
"""Every field both majors have but declare differently; the rest of 7.3 -> 8.x is additions the walk handles."""

RESPELLED: dict[tuple[str, str], Difference] = {
    tuple(d.where.split(".", 1)): d for d in DIFFERENCES if d.to_7 is not None  # type: ignore[misc]
}
"""(type, field) -> the row whose ``to_7`` writes its 7.3 spelling."""


def omitted(spec: dict, value: Any) -> bool:
    """Whether torch 2.5's writer leaves the field out: its 7.3 default is None and so is the value."""
    return value is None and spec.get("default") == "None"
