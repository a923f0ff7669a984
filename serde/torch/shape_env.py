"""Symbolic shapes for the import bridge: expression strings -> sympy -> a ShapeEnv.

Every ``expr_str`` goes through pt2x's restricted parser (``pt2x.serde.codec.symbolic``); the
parsed tree is turned into sympy here, one table entry per allowed function. Nothing is
``sympify``-ed or evaluated as Python.

State mirrors what torch's deserializer keeps (facts, not code): each sub-expression is
cached under ``str(expr)`` so a symbol is one object everywhere; backed symbols get their
hint, symbols in ``range_constraints`` get their range, unbacked ones are recorded so
the graph builder can bind them.

Imported lazily by the bridge (imports torch).
"""

from __future__ import annotations

import sympy
import torch.utils._sympy.functions as F
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.symbol import SymT, prefix_str, symbol_is_type
from torch.utils._sympy.value_ranges import ValueRanges

from ...schema import definitions as d
from ..codec.symbolic import ASSUMPTIONS, default_assumptions
from ..errors import SymbolicExprError

__all__ = ["SymbolicContext", "to_sympy"]

# Function names allowed in expressions -> sympy constructors.
_FUNCS: dict[str, object] = {
    name: getattr(F, name)
    for name in (
        "FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod", "CleanDiv", "CeilToInt",
        "FloorToInt", "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv",
        "IntTrueDiv", "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt",
        "RoundToInt", "RoundDecimal", "ToFloat", "Identity", "Max", "Min",
        "BitwiseFn_bitwise_and", "BitwiseFn_bitwise_or", "BitwiseFn_bitwise_xor",
        "OpaqueUnaryFn_sqrt", "OpaqueUnaryFn_exp", "OpaqueUnaryFn_log", "OpaqueUnaryFn_log2",
        "OpaqueUnaryFn_cos", "OpaqueUnaryFn_sin", "OpaqueUnaryFn_tan", "OpaqueUnaryFn_cosh",
        "OpaqueUnaryFn_sinh", "OpaqueUnaryFn_tanh", "OpaqueUnaryFn_acos", "OpaqueUnaryFn_asin",
        "OpaqueUnaryFn_atan", "OpaqueUnaryFn_asinh",
    )
    if hasattr(F, name)
}  # fmt: skip
_FUNCS.update(
    {
        "Not": sympy.Not, "And": sympy.And, "Or": sympy.Or, "Abs": sympy.Abs,
        "Eq": sympy.Eq, "Ne": sympy.Ne, "Lt": sympy.Lt, "Le": sympy.Le, "Gt": sympy.Gt, "Ge": sympy.Ge,
        "Equality": sympy.Eq, "Unequality": sympy.Ne, "StrictLessThan": sympy.Lt, "LessThan": sympy.Le,
        "StrictGreaterThan": sympy.Gt, "GreaterThan": sympy.Ge,
        "Rational": sympy.Rational, "floor": sympy.floor, "ceiling": sympy.ceiling,
        "Piecewise": sympy.Piecewise, "ExprCondPair": sympy.functions.elementary.piecewise.ExprCondPair,
    }
)  # fmt: skip

_REL = {
    "==": sympy.Eq, "!=": sympy.Ne, "<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt, ">=": sympy.Ge,
    "Eq": sympy.Eq, "Ne": sympy.Ne, "Lt": sympy.Lt, "Le": sympy.Le, "Gt": sympy.Gt, "Ge": sympy.Ge,
    "Equality": sympy.Eq, "Unequality": sympy.Ne, "StrictLessThan": sympy.Lt, "LessThan": sympy.Le,
    "StrictGreaterThan": sympy.Gt, "GreaterThan": sympy.Ge,
}  # fmt: skip

# sympy evaluates numeric powers and shifts eagerly: ``Pow(2, 10**300)`` would never
# finish. Shape expressions need small exponents; larger ones are refused.
MAX_EXPONENT = 4096
_EXPONENT_ARG = frozenset({"PowByNatural", "FloatPow", "LShift", "RShift"})


MAX_RESULT_BITS = 1 << 16


def _check_exponent(e, what: str, fail, base=None) -> None:
    if e.is_Number and abs(e) > MAX_EXPONENT:
        raise fail(f"{what} exponent/shift {e} is larger than {MAX_EXPONENT}")
    if base is not None and e.is_Number and base.is_Integer:
        bits = int(abs(base)).bit_length() * abs(float(e))
        if bits > MAX_RESULT_BITS:
            raise fail(f"{what}({base}, {e}) would be a number of ~{int(bits)} bits")


def _attr(node, *names):
    for n in names:
        if hasattr(node, n):
            return getattr(node, n)
    raise AttributeError(f"{type(node).__name__} has none of {names}")


def to_sympy(node, *, member: str | None, path: str | None, symbols: dict[str, sympy.Symbol] | None = None):
    """A parsed expression tree (``pt2x.serde.codec.symbolic``) as a sympy expression."""

    def fail(msg: str) -> SymbolicExprError:
        return SymbolicExprError(msg, member=member, path=path)

    def conv(n):
        kind = type(n).__name__
        if kind == "Integer":
            return sympy.Integer(int(_attr(n, "value", "v")))
        if kind == "Float":
            return sympy.Float(float(_attr(n, "value", "v")))
        if kind == "Boolean":
            return sympy.true if _attr(n, "value", "v") else sympy.false
        if kind == "Infinity":
            neg = bool(getattr(n, "negative", False)) or getattr(n, "sign", 1) < 0
            integral = getattr(n, "integer", True)
            inf = int_oo if integral else sympy.oo
            return -inf if neg else inf
        if kind == "Symbol":
            name = str(n.name)
            assumptions = dict(getattr(n, "assumptions", None) or {})
            bad = set(assumptions) - set(ASSUMPTIONS)
            if bad:
                raise fail(f"symbol {name!r} has unknown assumptions {sorted(bad)}")
            if not assumptions:
                assumptions = dict(default_assumptions(name))
            key = (name, tuple(sorted(assumptions.items())))
            if symbols is not None and key in symbols:
                return symbols[key]
            s = sympy.Symbol(name, **{k: bool(v) for k, v in assumptions.items()})
            if symbols is not None:
                symbols[key] = s
            return s
        if kind == "Add":
            return sympy.Add(*(conv(a) for a in n.args))
        if kind == "Mul":
            return sympy.Mul(*(conv(a) for a in n.args))
        if kind == "Pow":
            base, exp = conv(n.base), conv(n.exp)
            _check_exponent(exp, "Pow", fail, base)
            return sympy.Pow(base, exp)
        if kind == "Relational":
            op = _REL.get(str(n.op))
            if op is None:
                raise fail(f"unknown relation {n.op!r}")
            return op(conv(n.lhs), conv(n.rhs))
        if kind == "Call":
            fn = _FUNCS.get(str(n.func))
            if fn is None:
                raise fail(f"function {n.func!r} is not allowed in shape expressions")
            if fn is sympy.Rational:
                return sympy.Rational(*(int(conv(a)) for a in n.args))
            if n.func in _EXPONENT_ARG:
                args = [conv(a) for a in n.args]
                _check_exponent(args[1], n.func, fail, args[0])
                return fn(*args)
            if fn is sympy.Piecewise:
                return sympy.Piecewise(*((conv(p.args[0]), conv(p.args[1])) for p in n.args))
            return fn(*(conv(a) for a in n.args))
        if kind in _FUNCS:  # a parser that gives each function its own class
            return _FUNCS[kind](*(conv(a) for a in n.args))
        raise fail(f"unsupported expression node {kind}")

    try:
        return conv(node)
    except SymbolicExprError:
        raise
    except (TypeError, ValueError, ZeroDivisionError, AttributeError, RecursionError) as e:
        raise fail(f"cannot build expression: {type(e).__name__}: {e}") from None


def _parse(expr_str: str, member, path):
    from ..codec import symbolic  # the restricted parser (torch-free)

    parse = getattr(symbolic, "parse_cached", None) or symbolic.parse
    try:
        return parse(expr_str)
    except SymbolicExprError as e:
        if e.member is None:
            raise SymbolicExprError(e.reason, member=member, path=path) from None
        raise


def _default_range(sym: sympy.Symbol) -> ValueRanges:
    if sym.is_integer:
        lo = 1 if sym.is_positive else 0 if sym.is_nonnegative else -int_oo
        return ValueRanges(lo, int_oo)
    return ValueRanges.unknown()


class SymbolicContext:
    """ShapeEnv, fake-tensor mode and symbol tables for one program."""

    def __init__(self, range_constraints: dict[str, d.RangeConstraint], *, member: str | None):
        self.member = member
        self.shape_env = ShapeEnv(assume_static_by_default=True)
        from torch._subclasses.fake_tensor import FakeTensorMode

        self.fake_mode = FakeTensorMode(allow_fallback_kernels=False, allow_non_fake_inputs=True, shape_env=self.shape_env)
        self.by_str: dict[str, sympy.Expr] = {}  # str(expr) -> the one object for it
        self._symbols: dict = {}
        self._expr_cache: dict[str, sympy.Expr] = {}
        self.unbacked: set[sympy.Symbol] = set()
        self.ranges: dict[str, ValueRanges] = {}
        self.declared_ranges: dict[str, ValueRanges] = {}
        n_uf = n_ui = -1
        pf, pi = prefix_str[SymT.UNBACKED_FLOAT], prefix_str[SymT.UNBACKED_INT]
        for k, rc in range_constraints.items():
            lo = -int_oo if rc.min_val is None else sympy.Integer(rc.min_val)
            hi = int_oo if rc.max_val is None else sympy.Integer(rc.max_val)
            self.declared_ranges[k] = ValueRanges(lo, hi)
            self.ranges[k] = ValueRanges(lo, hi)
            if k.startswith(pf) and k[len(pf) :].isdigit():
                n_uf = max(n_uf, int(k[len(pf) :]))
            elif k.startswith(pi) and k[len(pi) :].isdigit():
                n_ui = max(n_ui, int(k[len(pi) :]))
        self.shape_env.unbacked_symfloat_counter += n_uf + 1
        self.shape_env.unbacked_symint_counter += n_ui + 1

    # ------------------------------------------------------------------ expressions

    def expr(self, expr_str: str, hint=None, *, path: str | None = None) -> sympy.Expr:
        e = self._expr_cache.get(expr_str)
        if e is None:
            tree = _parse(expr_str, self.member, path)
            e = to_sympy(tree, member=self.member, path=path, symbols=self._symbols)
            self._expr_cache[expr_str] = e
        return self._register(e, hint)

    def _register(self, e: sympy.Expr, hint=None) -> sympy.Expr:
        if e.is_Integer or e.is_Float or e.is_Boolean or e.is_Number:
            return e
        for a in e.args:
            self._register(a)
        s = str(e)
        known = self.by_str.get(s)
        if known is not None:
            e = known
        else:
            self.by_str[s] = e
            if isinstance(e, sympy.Symbol):
                if symbol_is_type(e, (SymT.UNBACKED_INT, SymT.UNBACKED_FLOAT)):
                    self.unbacked.add(e)
        env = self.shape_env
        if hint is not None and e not in env.backed_var_to_val:
            env.add_backed_var_to_val(e, hint)
        if isinstance(e, sympy.Symbol) and e not in env.var_to_range and s not in self.ranges:
            # A symbol the file gives no range for still needs one (the ShapeEnv asserts it
            # has one when reasoning about it): what its assumptions allow.
            env.var_to_range[e] = _default_range(e)
        vr = self.ranges.get(s)
        if vr is not None and isinstance(e, sympy.Symbol):
            # Ranges of derived expressions ("2*s94") stay in range_constraints only: the
            # ShapeEnv keeps ranges per symbol (a compound key there breaks
            # run_decompositions, as it does for programs torch.export.load reads).
            env.constrain_symbol_range(e, compiler_min=vr.lower, compiler_max=vr.upper)
        return e

    def _hint(self, h, want: str, path):
        if h is None:
            return None
        if h.type != want:
            raise SymbolicExprError(f"hint is {h.type}, expected {want}", member=self.member, path=path)
        return h.value

    def sym_int(self, s: d.SymInt, path: str | None = None):
        if s.type == "as_int":
            return s.value
        v = s.value
        hint = self._hint(v.hint, "as_int", path)
        e = self.expr(v.expr_str, hint, path=path)
        if e.is_Integer:
            return int(e)
        return self.shape_env.create_symintnode(e, hint=hint)

    def sym_float(self, s: d.SymFloat, path: str | None = None):
        if s.type == "as_float":
            return s.value
        v = s.value
        hint = self._hint(v.hint, "as_float", path)
        e = self.expr(v.expr_str, hint, path=path)
        return self.shape_env.create_symfloatnode(e, hint=hint)

    def sym_bool(self, s: d.SymBool, path: str | None = None):
        if s.type == "as_bool":
            return s.value
        e = self.expr(s.value.expr_str, path=path)
        return self.shape_env.create_symboolnode(e)

    def range_constraints(self) -> dict:
        """Declared ranges keyed by the symbol objects the graph uses (unused ones dropped)."""
        return {self.by_str[k]: vr for k, vr in self.declared_ranges.items() if k in self.by_str}
