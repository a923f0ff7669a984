"""Restricted parser for torch's symbolic shape expressions (``expr_str``).

torch writes symbolic sizes as sympy ``srepr`` text (``Add(Symbol('s0', positive=True,
integer=True), Integer(-1))``; older releases wrote ``str`` text such as ``s0 - 1``) and reads
them back with ``sympy.sympify``, which ``eval``s the string: editing the JSON is enough to run
code. pt2x never evals: a hand-written tokenizer and precedence-climbing parser accept a fixed
grammar and build the small immutable tree below.

Grammar (everything else is a ``SymbolicExprError`` naming the token and its position):

* numbers: ``3``, ``2.5``, ``1e-3``; constants ``true false True False oo int_oo``
  (``-oo``/``-int_oo`` through unary minus; pt2x keeps one infinity kind per sign);
* symbol names ``[a-z][a-z_]*[0-9]+`` at most 64 characters (``s0 s77 u0 zf0 zuf1 ps0 c1``:
  torch names every shape symbol as a lowercase prefix plus a counter), either bare or as
  ``Symbol('s0', <assumption>=True|False, ...)`` with sympy's assumption keywords only;
* ``Integer(n)``, ``Float('2.5', precision=53)``, ``Rational(p, q)``;
* ``Add Mul Pow``, relationals (``Eq Ne Lt Le Gt Ge`` and sympy's ``Equality Unequality
  StrictLessThan LessThan StrictGreaterThan GreaterThan``), ``And Or Not``, ``Max Min``,
  ``Piecewise``/``ExprCondPair``, sympy's ``floor ceiling Abs``, and the functions of
  ``torch.utils._sympy.functions`` (``FloorDiv Mod PythonMod CleanDiv CeilDiv
  ModularIndexing Where CeilToInt FloorToInt TruncToInt TruncToFloat RoundToInt RoundDecimal
  ToFloat IntTrueDiv FloatTrueDiv FloatPow PowByNatural LShift RShift Identity
  IsNonOverlappingAndDenseIndicator OpaqueUnaryFn_<math fn> BitwiseFn_bitwise_<and|or|xor>``);
* infix ``+ - * / // % **``, ``< <= > >=`` (not chained), ``& | ~`` on booleans, parentheses,
  with Python's precedence (what ``sympify`` would apply). ``==``/``!=`` infix are refused:
  in sympy they compare trees and give a Python bool, so ``Eq``/``Ne`` are the only way.

Strings appear only as the name of a ``Symbol`` or the digits of a ``Float``; keyword
arguments only in those two. Input is bounded by ``MAX_EXPR_CHARS`` and ``MAX_EXPR_DEPTH``.

``str(expr)`` (also ``to_text``) prints sympy ``srepr`` form, the form torch itself writes, so
a tree parsed from torch's text prints back byte-identical (assumptions in torch's order) and
torch's loader can read what pt2x writes. ``to_infix`` prints ``2*s0 + 1`` for people.

Evaluation (``Expr.evaluate``) gives each function the meaning of its class in
``torch.utils._sympy.functions``, the one torch's loader builds. torch folds an expression twice:
when it builds it (``sympify`` runs each class's ``eval`` rules and sympy's assumption
reasoning: ``Max(1, x)`` becomes ``1`` when ``x`` is known negative) and again once symbols have
values. Both must give the same number, and they do only on each function's domain, so pt2x
computes torch's value there and refuses (``SymbolicExprError``) outside it:

* ``FloorDiv``, ``CleanDiv``: Python's floor division, any signs (torch states it; its numeric
  rule computes it). ``CleanDiv`` only promises that nothing is rounded; its value is the floor.
  With ±``int_oo`` torch floors the float quotient (``a // int_oo == 0``);
* ``PythonMod``: Python's ``%`` (sign of the divisor), any signs;
* ``Mod``: ``p % q`` for ``p >= 0, q > 0`` only (torch asserts that on numbers);
* ``ModularIndexing(a, b, c)``: ``(a // b) % c`` for ``a >= 0, b > 0, c > 0`` only. Outside,
  torch contradicts itself: on numbers it computes Python's ``%`` (``ModularIndexing(-1, 1, 3)
  == 2``) while its assumptions call the result negative when ``a < 0 <= b`` (the "C modulus" of
  its docstring), so sympy folds ``Max(1, ModularIndexing(-1, 1, s0))`` to ``1``;
* ``CeilDiv(a, b)``: the ceiling for ``b > 0`` only; torch builds it as ``FloorDiv(a + b - 1, b)``,
  which is no ceiling for ``b < 0``;
* ``PowByNatural``: exact, but ±``int_oo`` once the magnitude passes ``sys.maxsize`` (torch's
  ``safe_pow``); ``LShift(a, s)`` is ``a * PowByNatural(2, s)`` and ``RShift(a, s)`` is
  ``FloorDiv(a, PowByNatural(2, s))``, as torch rewrites them;
* the integer functions above, ``IntTrueDiv`` and ``ToFloat`` take integers (``FloorDiv``,
  ``CleanDiv``, ``CeilDiv``, the shifts, ``IntTrueDiv`` and ``ToFloat`` also ±``int_oo``, as torch
  does); on floats and fractions torch leaves them unevaluated, so pt2x refuses;
* ``FloatPow`` is Python's ``float ** float`` (overflow, a complex result and ``0 ** -x`` are
  refused); ``oo - oo``, ``0 * oo`` and other NaNs are refused.

Two differences remain in torch itself, outside what pt2x can match: its symbolic rules are
unsound for negative divisors (``FloorDiv(FloorDiv(a, b), c) -> FloorDiv(a, b*c)`` needs
``c > 0``; ``PythonMod(p, q) -> p`` when ``p < q`` and ``p/q > 0`` needs ``q > 0``), where pt2x
gives the numeric value; and ``PowByNatural(x, 3)`` with a symbolic ``x`` becomes an exact
``x**3``, so past ``sys.maxsize`` torch's value depends on when it folded, where pt2x gives
``int_oo``.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from .. import limits
from ..errors import LimitExceededError, SymbolicExprError

__all__ = [
    "Expr", "Integer", "Float", "Boolean", "Infinity", "Symbol", "Add", "Mul", "Pow", "Call",
    "Relational", "parse", "parse_cached", "to_text", "to_infix", "ExprLimitError",
    "FUNCTIONS", "ASSUMPTIONS", "SYMBOL_NAME", "SYMBOL_PREFIX_ASSUMPTIONS", "default_assumptions",
]


class ExprLimitError(LimitExceededError, SymbolicExprError):
    """An expression past ``MAX_EXPR_CHARS``/``MAX_EXPR_DEPTH``: both a limit and a bad expression."""


SYMBOL_NAME = re.compile(r"[a-z][a-z_]*[0-9]+")
_MAX_NAME = 64
_MAX_INT_DIGITS = 400  # sizes fit in int64; this is generous and far below Python's int-str limit

ASSUMPTIONS = (
    # torch's order first (Symbol('s0', positive=True, integer=True)), then sympy's other keywords
    "positive", "integer", "nonnegative", "negative", "nonpositive", "real", "finite", "zero",
    "nonzero", "rational", "irrational", "even", "odd", "prime", "composite", "complex",
    "imaginary", "algebraic", "transcendental", "infinite", "commutative", "noninteger",
    "extended_real", "extended_positive", "extended_negative", "extended_nonnegative",
    "extended_nonpositive", "extended_nonzero", "hermitian", "antihermitian",
)
"""sympy's assumption keywords a ``Symbol`` may carry (everything else is refused), torch's
order first: the one list the parser and the torch bridge (``serde.torch.shape_env``) use."""
_ASSUMPTION_RANK = {k: i for i, k in enumerate(ASSUMPTIONS)}

SYMBOL_PREFIX_ASSUMPTIONS: dict[str, tuple[tuple[str, bool], ...]] = {
    "s": (("positive", True), ("integer", True)),  # SymT.SIZE: ShapeEnv.create_symbol of an int
    "u": (("integer", True),),  # SymT.UNBACKED_INT: create_unbacked_symint / symbool
    "zf": (("positive", True), ("real", True)),  # SymT.FLOAT: create_symbol of a float
    "zuf": (),  # SymT.UNBACKED_FLOAT: create_unbacked_symfloat gives none
}
"""torch's symbol prefixes (``torch.utils._sympy.symbol.prefix_str``) -> the assumptions, in
torch's order, that torch 2.13's ``ShapeEnv`` gives a fresh symbol of that prefix."""


def default_assumptions(name: str) -> tuple[tuple[str, bool], ...]:
    """Assumptions for a bare symbol name (``s0 - 1``, text of writers before srepr): those
    torch gives a symbol of its prefix; ``integer=True`` for a name of no known prefix."""
    return SYMBOL_PREFIX_ASSUMPTIONS.get(name.rstrip("0123456789"), (("integer", True),))

_REL_NAMES = {
    "Eq": "==", "Equality": "==", "Ne": "!=", "Unequality": "!=", "Lt": "<", "StrictLessThan": "<",
    "Le": "<=", "LessThan": "<=", "Gt": ">", "StrictGreaterThan": ">", "Ge": ">=", "GreaterThan": ">=",
}
_REL_SREPR = {"==": "Equality", "!=": "Unequality", "<": "StrictLessThan", "<=": "LessThan",
              ">": "StrictGreaterThan", ">=": "GreaterThan"}
_OPAQUE_UNARY = ("sqrt", "cos", "cosh", "sin", "sinh", "tan", "tanh", "asin", "acos", "atan", "exp",
                 "log", "asinh", "log2")

FUNCTIONS: dict[str, tuple[int, int | None]] = {
    # name -> (min args, max args or None for any)
    "FloorDiv": (2, 2), "CleanDiv": (2, 2), "CeilDiv": (2, 2), "ModularIndexing": (3, 3),
    "Where": (3, 3), "PythonMod": (2, 2), "Mod": (2, 2), "CeilToInt": (1, 1), "FloorToInt": (1, 1),
    "TruncToInt": (1, 1), "TruncToFloat": (1, 1), "RoundToInt": (1, 1), "RoundDecimal": (2, 2),
    "ToFloat": (1, 1), "IntTrueDiv": (2, 2), "FloatTrueDiv": (2, 2), "FloatPow": (2, 2),
    "PowByNatural": (2, 2), "LShift": (2, 2), "RShift": (2, 2), "Identity": (1, 1),
    "IsNonOverlappingAndDenseIndicator": (2, None), "Max": (1, None), "Min": (1, None),
    "And": (1, None), "Or": (1, None), "Not": (1, 1), "floor": (1, 1), "ceiling": (1, 1),
    "Abs": (1, 1), "Piecewise": (1, None), "ExprCondPair": (2, 2), "Rational": (2, 2),
    **{f"OpaqueUnaryFn_{n}": (1, 1) for n in _OPAQUE_UNARY},
    **{f"BitwiseFn_bitwise_{n}": (2, 2) for n in ("and", "or", "xor")},
}
"""Functions ``Call`` may name, with their arity (``Rational`` takes two integer literals)."""


# ---------------------------------------------------------------------------------------
# tree


class Expr:
    """Base of the expression tree: immutable, hashable, comparable by structure."""

    __slots__ = ()

    def children(self) -> tuple:
        return ()

    @property
    def free_symbols(self) -> frozenset[str]:
        out: set[str] = set()
        stack = [self]
        while stack:
            node = stack.pop()
            if isinstance(node, Symbol):
                out.add(node.name)
            else:
                stack.extend(node.children())
        return frozenset(out)

    def evaluate(self, env: Mapping[str, int | float | bool]) -> int | float | bool:
        """Value with concrete symbol values, with sympy/torch semantics for each function.
        Exact rationals are kept inside and returned as ``int`` when whole, else ``float``;
        infinities are ``±math.inf``."""
        try:
            v = _eval(self, env)
        except RecursionError:  # a hand-built tree deeper than the parser would allow
            raise ExprLimitError("expression too deep to evaluate") from None
        except OverflowError as e:  # an exact integer past the float range met a float
            raise SymbolicExprError(f"number out of float range: {e}") from None
        _not_nan(v, "result")
        if isinstance(v, Fraction):
            return int(v) if v.denominator == 1 else float(v)
        return v

    def __str__(self) -> str:
        return _srepr(self)


@dataclass(frozen=True, slots=True)
class Integer(Expr):
    value: int


@dataclass(frozen=True, slots=True)
class Float(Expr):
    value: float


@dataclass(frozen=True, slots=True)
class Boolean(Expr):
    value: bool


@dataclass(frozen=True, slots=True)
class Infinity(Expr):
    negative: bool = False


@dataclass(frozen=True, slots=True)
class Symbol(Expr):
    name: str
    assumptions: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True, slots=True)
class Add(Expr):
    args: tuple

    def children(self):
        return self.args


@dataclass(frozen=True, slots=True)
class Mul(Expr):
    args: tuple

    def children(self):
        return self.args


@dataclass(frozen=True, slots=True)
class Pow(Expr):
    base: Expr
    exp: Expr

    def children(self):
        return (self.base, self.exp)


@dataclass(frozen=True, slots=True)
class Call(Expr):
    func: str
    args: tuple

    def children(self):
        return self.args


@dataclass(frozen=True, slots=True)
class Relational(Expr):
    op: str
    lhs: Expr
    rhs: Expr

    def children(self):
        return (self.lhs, self.rhs)


# dataclass(slots=True) builds new classes; keep Expr.__str__ (dataclass adds only __repr__).

# ---------------------------------------------------------------------------------------
# tokenizer

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\n]+)
    |(?P<num>(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?)
    |(?P<name>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<str>'[^'\\\n]*'|"[^"\\\n]*")
    |(?P<op>\*\*|//|<=|>=|==|!=|<<|>>|[-+*/%(),<>=&|~^])""",
    re.X,
)
_FLOAT_TEXT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT_TEXT = re.compile(r"0|[1-9][0-9]*")


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    out = []
    pos, n = 0, len(text)
    match = _TOKEN.match
    while pos < n:
        m = match(text, pos)
        if m is None:  # reported when the parser reaches it, so earlier faults name themselves
            out.append(("bad", text[pos], pos))
            break
        kind = m.lastgroup
        if kind != "ws":
            out.append((kind, m.group(), pos))
        pos = m.end()
    else:
        out.append(("end", "", n))
    return out


# ---------------------------------------------------------------------------------------
# parser

_BINARY = {  # operator -> precedence (Python's order); ** and unary ops are handled apart
    "<": 1, "<=": 1, ">": 1, ">=": 1, "|": 2, "&": 3, "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6,
}
_REFUSED_OPS = {
    "==": "infix '==' (sympy compares trees there); write Eq(a, b)",
    "!=": "infix '!=' (sympy compares trees there); write Ne(a, b)",
    "^": "'^' (sympify reads it as '**'); write '**'",
    "<<": "'<<'; write LShift(a, b)", ">>": "'>>'; write RShift(a, b)", "=": "'=' outside Symbol/Float",
}


def _neg(e: Expr) -> Expr:
    if isinstance(e, Integer):
        return Integer(-e.value)
    if isinstance(e, Float):
        return Float(-e.value)
    if isinstance(e, Infinity):
        return Infinity(not e.negative)
    return Mul((Integer(-1), e))


class _Parser:
    __slots__ = ("toks", "i", "depth", "text")

    def __init__(self, text: str):
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0
        self.depth = 0

    # -- helpers
    def peek(self):
        return self.toks[self.i]

    def next(self):
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def fail(self, tok, what="unexpected"):
        kind, val, pos = tok
        if kind == "bad":
            what = "unexpected character"
        shown = "end of input" if kind == "end" else repr(val)
        return SymbolicExprError(f"{what} {shown} at position {pos}")

    def expect(self, val):
        tok = self.next()
        if tok[1] != val or tok[0] not in ("op",):
            raise self.fail(tok, f"expected {val!r}, got")
        return tok

    def enter(self, tok):
        self.depth += 1
        if self.depth > limits.MAX_EXPR_DEPTH:
            raise ExprLimitError(f"expression nested deeper than MAX_EXPR_DEPTH={limits.MAX_EXPR_DEPTH} "
                                 f"at position {tok[2]}")

    # -- grammar
    def parse(self) -> Expr:
        e = self.expr(0)
        tok = self.peek()
        if tok[0] != "end":
            raise self.fail(tok)
        return e

    def expr(self, min_prec: int) -> Expr:
        left = self.unary()
        while True:
            tok = self.peek()
            if tok[0] != "op":
                return left
            op = tok[1]
            if op in _REFUSED_OPS:
                raise self.fail(tok, f"refused {_REFUSED_OPS[op]}:")
            prec = _BINARY.get(op)
            if prec is None or prec < min_prec:
                return left
            if prec == 1:  # comparison: lowest precedence, never chained
                self.next()
                left = Relational(op, left, self.expr(2))
                nxt = self.peek()
                if nxt[0] == "op" and _BINARY.get(nxt[1]) == 1:
                    raise self.fail(nxt, "chained comparison")
                continue
            left = self.chain(left, op, prec)

    def chain(self, left, op, prec):
        """Collect a run of same-precedence operators into one flat node."""
        if op in ("|", "&"):
            func = "Or" if op == "|" else "And"
            args = [left]
            while self.peek()[1] == op and self.peek()[0] == "op":
                self.next()
                args.append(self.expr(prec + 1))
            return Call(func, tuple(args))
        if op in ("+", "-"):
            args = [left]
            while self.peek()[0] == "op" and self.peek()[1] in ("+", "-"):
                o = self.next()[1]
                r = self.expr(prec + 1)
                args.append(r if o == "+" else _neg(r))
            return Add(tuple(args))
        # * / // % (each // or % nests the tree one level: counted against the depth limit)
        factors = [left]
        nested = 0
        while self.peek()[0] == "op" and self.peek()[1] in ("*", "/", "//", "%"):
            tok = self.next()
            o = tok[1]
            r = self.expr(prec + 1)
            if o == "*":
                factors.append(r)
            elif o == "/":
                factors.append(Pow(r, Integer(-1)))
            else:
                self.enter(tok)
                nested += 1
                lhs = factors[0] if len(factors) == 1 else Mul(tuple(factors))
                factors = [Call("FloorDiv" if o == "//" else "Mod", (lhs, r))]
        self.depth -= nested
        return factors[0] if len(factors) == 1 else Mul(tuple(factors))

    def unary(self) -> Expr:
        tok = self.peek()
        if tok[0] == "op" and tok[1] in ("-", "+", "~"):
            self.next()
            self.enter(tok)
            operand = self.unary()
            self.depth -= 1
            if tok[1] == "-":
                return _neg(operand)
            if tok[1] == "~":
                return Call("Not", (operand,))
            return operand
        base = self.atom()
        tok = self.peek()
        if tok[0] == "op" and tok[1] == "**":
            self.next()
            self.enter(tok)
            exp = self.unary()
            self.depth -= 1
            return Pow(base, exp)
        return base

    def atom(self) -> Expr:
        tok = self.next()
        kind, val, pos = tok
        if kind == "num":
            return _number(val, pos)
        if kind == "op" and val == "(":
            self.enter(tok)
            e = self.expr(0)
            self.expect(")")
            self.depth -= 1
            return e
        if kind == "name":
            nxt = self.peek()
            if nxt[0] == "op" and nxt[1] == "(":
                return self.call(tok)
            if val in ("true", "True"):
                return Boolean(True)
            if val in ("false", "False"):
                return Boolean(False)
            if val in ("oo", "int_oo"):
                return Infinity(False)
            if SYMBOL_NAME.fullmatch(val) and len(val) <= _MAX_NAME:
                return Symbol(val, ())
            raise self.fail(tok, "unknown name")
        if kind == "str":
            raise self.fail(tok, "string outside Symbol()/Float():")
        raise self.fail(tok)

    def args(self, open_tok) -> list:
        """Comma-separated expressions up to ')' (the '(' is next)."""
        self.next()
        self.enter(open_tok)
        out = []
        if self.peek()[1] == ")" and self.peek()[0] == "op":
            self.next()
        else:
            while True:
                out.append(self.expr(0))
                tok = self.next()
                if tok[0] == "op" and tok[1] == ")":
                    break
                if not (tok[0] == "op" and tok[1] == ","):
                    raise self.fail(tok, "expected ',' or ')', got")
        self.depth -= 1
        return out

    def call(self, name_tok) -> Expr:
        name, pos = name_tok[1], name_tok[2]
        if name == "Symbol":
            return self.symbol_call()
        if name == "Float":
            return self.float_call(name_tok)
        if name not in FUNCTIONS and name not in _REL_NAMES and name not in ("Integer", "Add", "Mul", "Pow"):
            raise self.fail(name_tok, "function not allowed:")
        args = self.args(name_tok)
        n = len(args)
        if name == "Integer":
            if n != 1 or not isinstance(args[0], Integer):
                raise SymbolicExprError(f"Integer() takes one integer literal at position {pos}")
            return args[0]
        if name in ("Add", "Mul"):
            if n < 1:
                raise SymbolicExprError(f"{name}() needs arguments at position {pos}")
            return (Add if name == "Add" else Mul)(tuple(args))
        if name == "Pow":
            if n != 2:
                raise SymbolicExprError(f"Pow() takes 2 arguments, got {n}, at position {pos}")
            return Pow(args[0], args[1])
        if name in _REL_NAMES:
            if n != 2:
                raise SymbolicExprError(f"{name}() takes 2 arguments, got {n}, at position {pos}")
            return Relational(_REL_NAMES[name], args[0], args[1])
        lo, hi = FUNCTIONS[name]
        if n < lo or (hi is not None and n > hi):
            raise SymbolicExprError(f"{name}() takes {lo if lo == hi else f'{lo}+'} arguments, got {n}, "
                                    f"at position {pos}")
        if name == "Rational" and not all(isinstance(a, Integer) for a in args):
            raise SymbolicExprError(f"Rational() takes two integer literals at position {pos}")
        if name == "IsNonOverlappingAndDenseIndicator" and n % 2:
            raise SymbolicExprError(f"{name}() takes an even number of arguments at position {pos}")
        if name == "Piecewise" and not all(isinstance(a, Call) and a.func == "ExprCondPair" for a in args):
            raise SymbolicExprError(f"Piecewise() takes ExprCondPair(...) arguments at position {pos}")
        return Call(name, tuple(args))

    def symbol_call(self) -> Symbol:
        self.next()  # (
        tok = self.next()
        if tok[0] != "str":
            raise self.fail(tok, "Symbol() needs a quoted name, got")
        name = tok[1][1:-1]
        if not (SYMBOL_NAME.fullmatch(name) and len(name) <= _MAX_NAME):
            raise self.fail(tok, "refused symbol name")
        seen: dict[str, bool] = {}
        while True:
            tok = self.next()
            if tok[0] == "op" and tok[1] == ")":
                break
            if not (tok[0] == "op" and tok[1] == ","):
                raise self.fail(tok, "expected ',' or ')', got")
            key = self.next()
            if key[0] != "name" or key[1] not in _ASSUMPTION_RANK:
                raise self.fail(key, "unknown Symbol assumption")
            if key[1] in seen:
                raise self.fail(key, "repeated Symbol assumption")
            self.expect("=")
            v = self.next()
            if v[0] != "name" or v[1] not in ("True", "False"):
                raise self.fail(v, "Symbol assumption value must be True or False, got")
            seen[key[1]] = v[1] == "True"
        return Symbol(name, tuple(sorted(seen.items(), key=lambda kv: _ASSUMPTION_RANK[kv[0]])))

    def float_call(self, name_tok) -> Float:
        self.next()  # (
        tok = self.next()
        sign = ""
        if tok[0] == "op" and tok[1] in ("-", "+"):
            sign, tok = tok[1], self.next()
        if tok[0] == "str":
            text = tok[1][1:-1]
            if sign or not _FLOAT_TEXT.fullmatch(text):
                raise self.fail(tok, "Float() string must be a decimal number, got")
        elif tok[0] == "num":
            text = sign + tok[1]
        else:
            raise self.fail(tok, "Float() takes a number, got")
        tok = self.next()
        if tok[0] == "op" and tok[1] == ",":
            key = self.next()
            if key[1] != "precision":
                raise self.fail(key, "Float() keyword must be precision, got")
            self.expect("=")
            v = self.next()
            if v[1] != "53":
                raise self.fail(v, "only precision=53 (double) is supported, got")
            tok = self.next()
        if not (tok[0] == "op" and tok[1] == ")"):
            raise self.fail(tok, "expected ')', got")
        return Float(_float_value(text, name_tok[2]))


def _float_value(text: str, pos: int) -> float:
    if len(text) > _MAX_INT_DIGITS:
        raise SymbolicExprError(f"number too long at position {pos}")
    v = float(text)
    if not math.isfinite(v):
        raise SymbolicExprError(f"float {text!r} out of range at position {pos}")
    return v


def _number(text: str, pos: int) -> Expr:
    if _INT_TEXT.fullmatch(text):
        if len(text) > _MAX_INT_DIGITS:
            raise SymbolicExprError(f"integer literal of {len(text)} digits at position {pos}")
        return Integer(int(text))
    if text.isdigit():
        raise SymbolicExprError(f"integer literal with leading zero {text!r} at position {pos}")
    return Float(_float_value(text, pos))


def parse(text: str) -> Expr:
    """Parse one ``expr_str``; raises ``SymbolicExprError`` (or ``ExprLimitError``)."""
    if not isinstance(text, str):
        raise SymbolicExprError(f"expression must be a string, got {type(text).__name__}")
    if len(text) > limits.MAX_EXPR_CHARS:
        raise ExprLimitError(f"expression of {len(text)} characters exceeds MAX_EXPR_CHARS={limits.MAX_EXPR_CHARS}")
    try:
        return _Parser(text).parse()
    except RecursionError:  # cannot happen within MAX_EXPR_DEPTH; never let it escape
        raise ExprLimitError("expression nested too deeply") from None


@functools.lru_cache(maxsize=8192)
def parse_cached(text: str) -> Expr:
    """``parse`` with an LRU cache: files repeat the same expression many times."""
    return parse(text)


# ---------------------------------------------------------------------------------------
# printing


def _srepr(e: Expr) -> str:
    if isinstance(e, Integer):
        return f"Integer({e.value})"
    if isinstance(e, Float):
        return f"Float('{e.value!r}', precision=53)"
    if isinstance(e, Boolean):
        return "true" if e.value else "false"
    if isinstance(e, Infinity):
        return "-oo" if e.negative else "oo"
    if isinstance(e, Symbol):
        extra = "".join(f", {k}={v}" for k, v in e.assumptions)
        return f"Symbol('{e.name}'{extra})"
    if isinstance(e, Add):
        return f"Add({', '.join(_srepr(a) for a in e.args)})"
    if isinstance(e, Mul):
        return f"Mul({', '.join(_srepr(a) for a in e.args)})"
    if isinstance(e, Pow):
        return f"Pow({_srepr(e.base)}, {_srepr(e.exp)})"
    if isinstance(e, Relational):
        return f"{_REL_SREPR[e.op]}({_srepr(e.lhs)}, {_srepr(e.rhs)})"
    if isinstance(e, Call):
        if e.func == "Rational":
            return f"Rational({e.args[0].value}, {e.args[1].value})"
        return f"{e.func}({', '.join(_srepr(a) for a in e.args)})"
    raise SymbolicExprError(f"not an expression node: {type(e).__name__}")


def to_text(expr: Expr) -> str:
    """Canonical text (sympy ``srepr`` form, as torch writes it); ``parse`` reads it back equal."""
    return _srepr(expr)


_PREC_ATOM, _PREC_POW, _PREC_UNARY, _PREC_MUL, _PREC_ADD, _PREC_REL = 9, 8, 7, 6, 5, 1


def _infix(e: Expr) -> tuple[str, int]:
    if isinstance(e, Integer):
        return str(e.value), (_PREC_ATOM if e.value >= 0 else _PREC_UNARY)
    if isinstance(e, Float):
        return repr(e.value), (_PREC_ATOM if e.value >= 0 else _PREC_UNARY)
    if isinstance(e, Boolean):
        return str(e.value), _PREC_ATOM
    if isinstance(e, Infinity):
        return ("-oo", _PREC_UNARY) if e.negative else ("oo", _PREC_ATOM)
    if isinstance(e, Symbol):
        return e.name, _PREC_ATOM
    if isinstance(e, Add):
        parts = []
        for i, a in enumerate(e.args):
            neg = None
            if i and isinstance(a, Mul) and len(a.args) == 2 and a.args[0] == Integer(-1):
                neg = a.args[1]
            elif i and isinstance(a, (Integer, Float)) and a.value < 0:
                neg = type(a)(-a.value)
            if neg is not None:
                parts.append(" - " + _paren(neg, _PREC_MUL))
            else:
                parts.append((" + " if i else "") + _paren(a, _PREC_ADD + (1 if i else 0)))
        return "".join(parts), _PREC_ADD
    if isinstance(e, Mul):
        if len(e.args) == 2 and e.args[0] == Integer(-1):
            return "-" + _paren(e.args[1], _PREC_POW), _PREC_UNARY
        return "*".join(_paren(a, _PREC_MUL + (1 if i else 0)) for i, a in enumerate(e.args)), _PREC_MUL
    if isinstance(e, Pow):
        return f"{_paren(e.base, _PREC_ATOM)}**{_paren(e.exp, _PREC_UNARY)}", _PREC_POW
    if isinstance(e, Relational):
        if e.op in ("==", "!="):
            return f"{'Eq' if e.op == '==' else 'Ne'}({_infix(e.lhs)[0]}, {_infix(e.rhs)[0]})", _PREC_ATOM
        return f"{_paren(e.lhs, _PREC_REL + 1)} {e.op} {_paren(e.rhs, _PREC_REL + 1)}", _PREC_REL
    if isinstance(e, Call):
        if e.func == "Rational":
            return f"Rational({e.args[0].value}, {e.args[1].value})", _PREC_ATOM
        return f"{e.func}({', '.join(_infix(a)[0] for a in e.args)})", _PREC_ATOM
    raise SymbolicExprError(f"not an expression node: {type(e).__name__}")


def _paren(e: Expr, need: int) -> str:
    text, prec = _infix(e)
    return text if prec >= need else f"({text})"


def to_infix(expr: Expr) -> str:
    """Readable infix text (``2*s0 + 1``, ``FloorDiv(s0, 2)``, ``s0 <= 64``) for messages.
    ``parse`` reads it back to the same value, but symbols lose their assumptions."""
    return _infix(expr)[0]


# ---------------------------------------------------------------------------------------
# evaluation

_INF = math.inf


def _err(msg: str) -> SymbolicExprError:
    return SymbolicExprError(msg)


def _num(v, what):
    if isinstance(v, bool) or not isinstance(v, (int, float, Fraction)):
        raise _err(f"{what} needs a number, got {v!r:.40}")
    return v


def _boolean(v, what):
    if not isinstance(v, bool):
        raise _err(f"{what} needs a boolean, got {v!r:.40}")
    return v


def _is_whole(v) -> bool:
    return isinstance(v, int) or (isinstance(v, Fraction) and v.denominator == 1)


def _int_or_inf(v):
    """torch's int_oo: an integer result that overflowed or is infinite stays ±inf."""
    return v if isinstance(v, float) and math.isinf(v) else int(v)


def _check_bits(v, what):
    if isinstance(v, int) and v.bit_length() > limits.MAX_EXPR_INT_BITS:
        raise ExprLimitError(f"{what} result exceeds MAX_EXPR_INT_BITS={limits.MAX_EXPR_INT_BITS}")
    return v


def _pow(b, e):
    """sympy Pow on numbers: exact for rational base and integer exponent, float otherwise."""
    b, e = _num(b, "Pow"), _num(e, "Pow")
    if isinstance(b, float) or isinstance(e, float) or not _is_whole(e):
        fb, fe = float(b), float(e)
        if fb < 0 and not fe.is_integer():
            raise _err("Pow of a negative base to a fractional power is not real")
        if fb == 0 and fe < 0:
            raise _err("Pow: zero to a negative power")
        try:
            return fb ** fe
        except OverflowError:
            return _INF if fb > 0 or fe % 2 == 0 else -_INF
    e = int(e)
    if e < 0:
        if b == 0:
            raise _err("Pow: zero to a negative power")
        return Fraction(1) / _pow(b, -e)
    if abs(b) > 1:
        size = b.bit_length() if isinstance(b, int) else max(b.numerator.bit_length(), b.denominator.bit_length())
        if e * (size - 1) > limits.MAX_EXPR_INT_BITS:
            raise ExprLimitError(f"Pow result exceeds MAX_EXPR_INT_BITS={limits.MAX_EXPR_INT_BITS}")
    r = b ** e
    return int(r) if _is_whole(r) else r


def _int_operand(v, what, infinite=False):
    """An operand of one of torch's integer functions: a whole number, returned as ``int``, or
    (where ``infinite``) ±inf, torch's ``int_oo``. Floats and fractions are refused: torch leaves
    these functions unevaluated on them (its classes declare ``is_integer``)."""
    v = _num(v, what)
    if _is_whole(v):
        return int(v)
    if infinite and isinstance(v, float) and math.isinf(v):
        return v
    raise _err(f"{what} needs {'integer' if infinite else 'finite integer'} operands, got {v!r:.40}")


def _outside(what, args, domain):
    """The refusal for arguments outside the domain on which torch's definition holds."""
    shown = ", ".join(str(a) for a in args)
    return _err(f"{what}({shown}) is outside its domain: {domain}")


def _floordiv(a, b, what="FloorDiv"):
    """torch's FloorDiv (also CleanDiv): Python's floor division, for any signs; with ±int_oo
    the float quotient, floored (torch's own rule), so ``a // int_oo`` is 0."""
    a, b = _int_operand(a, what, True), _int_operand(b, what, True)
    if b == 0:
        raise _err(f"{what}: division by zero")
    if isinstance(a, float) or isinstance(b, float):
        if math.isinf(a) and math.isinf(b):
            raise _err(f"{what} of two infinities is undefined")
        r = a / b
        return r if math.isinf(r) else math.floor(r)
    return a // b


def _ceildiv(a, b):
    """torch's CeilDiv, built by torch as ``FloorDiv(a + b - 1, b)``: a ceiling for ``b > 0`` only."""
    a, b = _int_operand(a, "CeilDiv", True), _int_operand(b, "CeilDiv")
    if b == 0:
        raise _err("CeilDiv: division by zero")
    if b < 0:
        raise _outside("CeilDiv", (a, b), "the divisor must be positive (torch computes "
                       "FloorDiv(a + b - 1, b), a ceiling only for b > 0)")
    return -_floordiv(-a, b, "CeilDiv")


def _python_mod(a, b):
    """torch's PythonMod: Python's ``%`` (the sign of the divisor), for any signs."""
    a, b = _int_operand(a, "PythonMod"), _int_operand(b, "PythonMod")
    if b == 0:
        raise _err("PythonMod: modulo by zero")
    return a % b


def _mod(a, b):
    """torch's Mod: defined on non-negative integers only (torch asserts ``p >= 0, q >= 1``)."""
    a, b = _int_operand(a, "Mod"), _int_operand(b, "Mod")
    if b == 0:
        raise _err("Mod: modulo by zero")
    if a < 0 or b < 0:
        raise _outside("Mod", (a, b), "torch defines Mod(p, q) for p >= 0 and q > 0 only")
    return a % b


def _modular_indexing(a, b, c):
    """torch's ModularIndexing ``(a // b) % c`` on its indexing domain ``a >= 0, b > 0, c > 0``."""
    a, b, c = (_int_operand(v, "ModularIndexing") for v in (a, b, c))
    if b == 0:
        raise _err("ModularIndexing: division by zero")
    if c == 0:
        raise _err("ModularIndexing: modulo by zero")
    if a < 0 or b < 0 or c < 0:
        raise _outside("ModularIndexing", (a, b, c), "torch defines ModularIndexing(a, b, c) for "
                       "a >= 0, b > 0, c > 0 only (elsewhere its folding rules and its value disagree)")
    return (a // b) % c


def _safe_pow_nat(b, e):
    """torch's PowByNatural on numbers (its ``safe_pow``): ±int_oo once the magnitude passes
    ``sys.maxsize``; ``b ** int_oo`` is int_oo for ``b >= 0``."""
    b, e = _num(b, "PowByNatural"), _num(e, "PowByNatural")
    if not (_is_whole(b) and _is_whole(e)):
        if isinstance(e, float) and math.isinf(e) and e > 0:
            if b >= 0:
                return _INF
        raise _err("PowByNatural needs integers")
    b, e = int(b), int(e)
    if e < 0:
        raise _err("PowByNatural exponent must be non-negative")
    sign = -1 if b < 0 and e % 2 else 1
    mag = abs(b)
    if mag >= 2 and e >= 64:
        return sign * _INF
    r = mag ** e
    return sign * _INF if r > sys.maxsize else sign * r


def _non_overlapping_and_dense(args):
    if not all(_is_whole(a) for a in args):
        raise _err("IsNonOverlappingAndDenseIndicator needs integers")
    args = [int(a) for a in args]
    dim = len(args) // 2
    sizes, strides = args[:dim], args[dim:]
    if dim == 1:
        return int(strides[0] == 1 or sizes[0] < 2)
    expected = 1
    for length, stride in sorted(zip(sizes, strides), key=operator.itemgetter(1)):
        if length == 1:
            continue
        if stride != expected:
            return 0
        expected *= length
    return 1


def _opaque(name):
    fn = getattr(math, name)

    def run(x):
        try:
            return float(fn(float(_num(x, f"OpaqueUnaryFn_{name}"))))
        except (ValueError, OverflowError) as e:
            raise _err(f"OpaqueUnaryFn_{name}({x}): {e}") from None

    return run


def _bitwise(opname):
    op = getattr(operator, opname)

    def run(a, b):
        if isinstance(a, bool) and isinstance(b, bool):
            return bool(op(a, b))
        a, b = int(a) if isinstance(a, bool) else a, int(b) if isinstance(b, bool) else b
        if not (_is_whole(a) and _is_whole(b)):
            raise _err("bitwise functions need integers")
        return op(int(a), int(b))

    return run


def _ceil_to_int(x):
    x = _num(x, "CeilToInt")
    return x if isinstance(x, float) and math.isinf(x) else math.ceil(float(x))


def _floor_to_int(x):
    x = _num(x, "FloorToInt")
    if isinstance(x, int):
        return x
    return x if isinstance(x, float) and math.isinf(x) else math.floor(float(x))


def _trunc_to_int(x):
    x = _num(x, "TruncToInt")
    return x if isinstance(x, float) and math.isinf(x) else math.trunc(float(x))


def _round_to_int(x):
    x = _num(x, "RoundToInt")
    return x if isinstance(x, float) and math.isinf(x) else int(round(float(x), 0))


def _not_nan(v, what):
    if isinstance(v, float) and math.isnan(v):
        raise _err(f"{what} is undefined (NaN)")
    return v


def _true_div(a, b, what):
    """IntTrueDiv (integers or ±int_oo; Python's correctly rounded ``int / int``) and
    FloatTrueDiv (any numbers, as floats)."""
    if what == "IntTrueDiv":
        a, b = _int_operand(a, what, True), _int_operand(b, what, True)
    else:
        a, b = _num(a, what), _num(b, what)
    if b == 0:
        raise _err(f"{what}: division by zero")
    if isinstance(a, int) and isinstance(b, int):
        return a / b  # correctly rounded, as sympy.Float(int / int)
    return _not_nan(float(a) / float(b), what)


def _float_pow(a, b):
    """torch's FloatPow: Python's ``float ** float``; its errors are refusals."""
    a, b = float(_num(a, "FloatPow")), float(_num(b, "FloatPow"))
    try:
        r = a ** b
    except ZeroDivisionError:
        raise _err("FloatPow: zero to a negative power") from None
    except OverflowError:
        raise _err("FloatPow: result out of float range") from None
    if isinstance(r, complex):
        raise _err("FloatPow of a negative base to a fractional power is not real")
    return r


def _shift_operands(a, s, what):
    a, s = _int_operand(a, what, True), _int_operand(s, what, True)
    if s < 0:
        raise _err(f"{what}: negative shift count")
    return a, _safe_pow_nat(2, s)


def _lshift(a, s):
    """torch's LShift: ``a * PowByNatural(2, s)``, so ±int_oo once ``2**s`` passes sys.maxsize."""
    a, p = _shift_operands(a, s, "LShift")
    if isinstance(p, float) or isinstance(a, float):
        if a == 0:
            raise _err("LShift: 0 * int_oo is undefined")
        return math.copysign(_INF, a)
    return _check_bits(a * p, "LShift")


def _rshift(a, s):
    """torch's RShift: ``FloorDiv(a, PowByNatural(2, s))``, so 0 once ``2**s`` passes sys.maxsize."""
    a, p = _shift_operands(a, s, "RShift")
    return _floordiv(a, p, "RShift")


def _exact_round(fn, x, what):
    """sympy's floor/ceiling: exact on rationals (math.floor(Fraction) is), ±oo stays."""
    x = _num(x, what)
    return x if isinstance(x, float) and math.isinf(x) else fn(x)


def _minmax(fn, what):
    def run(*xs):
        return fn(_num(x, what) for x in xs)

    return run


_FUNCS = {
    "FloorDiv": _floordiv,
    "CleanDiv": lambda a, b: _floordiv(a, b, "CleanDiv"),
    "CeilDiv": _ceildiv,
    "ModularIndexing": _modular_indexing,
    "PythonMod": _python_mod,
    "Mod": _mod,
    "CeilToInt": _ceil_to_int,
    "FloorToInt": _floor_to_int,
    "TruncToInt": _trunc_to_int,
    "TruncToFloat": lambda x: x if isinstance(x, float) and math.isinf(x) else
    float(math.trunc(float(_num(x, "TruncToFloat")))),
    "RoundToInt": _round_to_int,
    "RoundDecimal": lambda x, n: float(round(float(_num(x, "RoundDecimal")), _int_operand(n, "RoundDecimal"))),
    "ToFloat": lambda x: float(_int_operand(x, "ToFloat", True)),
    "IntTrueDiv": lambda a, b: _true_div(a, b, "IntTrueDiv"),
    "FloatTrueDiv": lambda a, b: _true_div(a, b, "FloatTrueDiv"),
    "FloatPow": _float_pow,
    "PowByNatural": _safe_pow_nat,
    "LShift": _lshift,
    "RShift": _rshift,
    "Identity": lambda x: x,
    "IsNonOverlappingAndDenseIndicator": lambda *a: _non_overlapping_and_dense(a),
    "Max": _minmax(max, "Max"),
    "Min": _minmax(min, "Min"),
    "Not": lambda x: not _boolean(x, "Not"),
    "floor": lambda x: _exact_round(math.floor, x, "floor"),
    "ceiling": lambda x: _exact_round(math.ceil, x, "ceiling"),
    "Abs": lambda x: abs(_num(x, "Abs")),
    "Rational": lambda p, q: Fraction(p, q),
    **{f"OpaqueUnaryFn_{n}": _opaque(n) for n in _OPAQUE_UNARY},
    "BitwiseFn_bitwise_and": _bitwise("and_"),
    "BitwiseFn_bitwise_or": _bitwise("or_"),
    "BitwiseFn_bitwise_xor": _bitwise("xor"),
}

_REL_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
            ">=": operator.ge}


def _eval(e: Expr, env):
    if isinstance(e, Integer):
        return e.value
    if isinstance(e, Symbol):
        try:
            v = env[e.name]
        except KeyError:
            raise _err(f"no value for symbol {e.name!r}") from None
        if isinstance(v, (bool, int, float)):
            return v
        # numpy scalars and other numbers.Number types
        if isinstance(v, numbers.Integral):
            return bool(v) if type(v).__name__.startswith("bool") else int(v)
        if isinstance(v, numbers.Real):
            return float(v)
        if type(v).__name__ in ("bool_", "bool"):
            return bool(v)
        raise _err(f"value of {e.name!r} must be int, float or bool, got {type(v).__name__}")
    if isinstance(e, Add):
        total = 0
        for a in e.args:
            total = total + _num(_eval(a, env), "Add")
        return _not_nan(total, "Add (oo - oo)")
    if isinstance(e, Mul):
        prod = 1
        for a in e.args:
            prod = prod * _num(_eval(a, env), "Mul")
            if isinstance(prod, int):
                _check_bits(prod, "Mul")
        return _not_nan(prod, "Mul (0 * oo)")
    if isinstance(e, Float):
        return e.value
    if isinstance(e, Boolean):
        return e.value
    if isinstance(e, Infinity):
        return -_INF if e.negative else _INF
    if isinstance(e, Pow):
        return _pow(_eval(e.base, env), _eval(e.exp, env))
    if isinstance(e, Relational):
        lhs, rhs = _eval(e.lhs, env), _eval(e.rhs, env)
        if e.op not in ("==", "!="):
            _num(lhs, e.op), _num(rhs, e.op)
        return bool(_REL_OPS[e.op](lhs, rhs))
    if isinstance(e, Call):
        f = e.func
        if f == "And":
            return all([_boolean(_eval(a, env), "And") for a in e.args])
        if f == "Or":
            return any([_boolean(_eval(a, env), "Or") for a in e.args])
        if f == "Where":
            c = _boolean(_eval(e.args[0], env), "Where")
            return _eval(e.args[1] if c else e.args[2], env)
        if f == "Piecewise":
            for pair in e.args:
                if _boolean(_eval(pair.args[1], env), "Piecewise"):
                    return _eval(pair.args[0], env)
            raise _err("Piecewise: no condition holds")
        if f == "ExprCondPair":
            raise _err("ExprCondPair outside Piecewise")
        if f == "Rational":
            return _FUNCS[f](e.args[0].value, e.args[1].value)
        try:
            fn = _FUNCS[f]
        except KeyError:
            raise _err(f"function not allowed: {f!r}") from None
        try:
            return fn(*[_eval(a, env) for a in e.args])
        except (ZeroDivisionError, OverflowError, ValueError, TypeError) as exc:
            raise _err(f"{f}: {exc}") from None
    raise _err(f"not an expression node: {type(e).__name__}")
