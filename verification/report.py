"""``Report``: what a verification found, rendered as a table (``table``) or JSON (``as_dict``).

The JSON object (``pt2x verify --json``, ``pt2x.verify(...).as_dict()``) has the keys
``ok``, ``model``, ``converted``, ``target``, ``runtime``, ``reference``, ``inputs``
(``source``, ``seed``, ``sets``: label and input shapes), ``matched_by`` (``name`` or ``order``),
``tolerances`` (dtype -> text), ``outputs`` (one per output and input set: ``set``, ``index``,
``name``, ``dtype``, ``shape``, ``max_abs``, ``max_rel``, ``tolerance``, ``mismatched``,
``total``, ``ok``, ``note``), ``divergence`` (null, or ``aten_node``, ``aten_target``,
``module_path``, ``converted_node``, ``converted_op``, ``tensor``, ``max_abs``, ``max_rel``,
``tolerance``, ``compared``, ``note``, ``converted_nodes``), ``compared_values`` and ``values`` (with
``--locate``: every value compared, at its worst over the input sets: ``tensor``, ``aten_node``,
``converted_node``, ``converted_op``, ``computed_by``, ``ok``, ``max_abs``, ``max_rel``, ``ratio``,
``tolerance``, ``note``) and ``notes``. Infinite differences are written as null.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

__all__ = ["OutputCheck", "Divergence", "ValueDifference", "Report"]


@dataclass(frozen=True)
class OutputCheck:
    set: str
    index: int
    name: str
    dtype: str
    shape: list
    max_abs: float
    max_rel: float
    tolerance: str
    mismatched: int
    total: int
    ok: bool
    note: str = ""


@dataclass(frozen=True)
class Divergence:
    """The first value, in execution order, that differs beyond tolerance."""

    aten_node: str | None
    aten_target: str | None
    module_path: str | None
    converted_node: str
    converted_op: str
    tensor: str
    max_abs: float
    max_rel: float
    tolerance: str
    compared: int  # values compared up to and including this one
    note: str = ""  # a shape that differs, in words
    converted_nodes: list = field(default_factory=list)  # "node (op) -> outputs": the node and those feeding it
    # through values the reference lacks, in execution order: where the divergence arises


@dataclass(frozen=True)
class ValueDifference:
    """One value of the program the converted file also holds, compared (``--locate``), at its
    worst over the input sets."""

    tensor: str  # the value's name in the program, the file and the reference
    aten_node: str | None  # the ATen node that makes it (None: a value of the converted file only)
    converted_node: str  # the converted node that writes it (ONNX node name, "#i" for TFLite operator i)
    converted_op: str
    computed_by: list  # the converted nodes that made it from values already found equal, in order
    ok: bool
    max_abs: float
    max_rel: float
    ratio: float  # the worst element's difference over what its tolerance allows: past it above 1
    tolerance: str
    note: str = ""


@dataclass
class Report:
    ok: bool
    model: str
    converted: str
    target: str
    runtime: str
    reference: str
    inputs: dict
    matched_by: str
    tolerances: dict
    outputs: list[OutputCheck] = field(default_factory=list)
    divergence: Divergence | None = None
    located: bool = False  # --locate was asked
    compared_values: int = 0  # intermediates compared by --locate
    notes: list[str] = field(default_factory=list)
    values: list[ValueDifference] = field(default_factory=list)  # with --locate: every value compared

    def as_dict(self) -> dict:
        d = asdict(self)
        if not d.pop("located"):
            d.pop("compared_values")
            d.pop("values")
        return _finite(d)

    def table(self, escape=str) -> str:
        """The report as text; ``escape`` is applied to every name taken from a file (the CLI
        passes its own, which escapes line breaks and control characters)."""
        return "\n".join(_lines(self, escape))


def _finite(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else ("nan" if math.isnan(x) else f"{x:.3g}")


def _lines(r: Report, e) -> list[str]:
    inputs = r.inputs
    seed = f", seed {inputs['seed']}" if inputs.get("seed") is not None else ""
    out = [f"verify {e(r.converted)} ({r.target}, {r.runtime}) against {r.reference}",
           f"inputs: {e(inputs['source'])}{seed}; outputs matched by {r.matched_by}"]
    if inputs.get("sets"):
        out.append("input shapes: " + "; ".join(f"{s['label']} {s['shapes']}" for s in inputs["sets"]))
    rows = [("set", "output", "dtype", "shape", "max abs", "max rel", "tolerance", "result")]
    for c in r.outputs:
        result = "ok" if c.ok else (c.note or f"{c.mismatched}/{c.total} differ")
        rows.append((c.set, f"{c.index} {e(c.name)}", c.dtype, str(c.shape), _num(c.max_abs), _num(c.max_rel),
                     c.tolerance, result))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    out += [f"note: {e(n)}" for n in r.notes]
    if r.located:
        out += _divergence_lines(r.divergence, r.compared_values, e)
    out.append("result: " + ("equal within tolerance" if r.ok else "DIFFERENT"))
    return out


def _divergence_lines(dv: Divergence | None, compared: int, e) -> list[str]:
    if dv is None:
        return [f"locate: none of the {compared} intermediate values compared differs beyond tolerance"]
    aten = f"{e(dv.aten_node)} = {e(dv.aten_target)}" if dv.aten_node else "(no ATen origin recorded)"
    module = e(dv.module_path) if dv.module_path else ("(the exported module itself)" if dv.module_path == "" else "?")
    return [
        f"locate: first divergence ({dv.compared} values compared)",
        f"  ATen node:      {aten}",
        f"  module path:    {module}",
        f"  converted node: {e(dv.converted_node)} ({e(dv.converted_op)}), tensor {e(dv.tensor)}",
        f"  difference:     " + (e(dv.note) if dv.note else
                                 f"max abs {_num(dv.max_abs)}, max rel {_num(dv.max_rel)} (tolerance {dv.tolerance})"),
    ] + (["  computed by:    " + "\n                  ".join(e(n) for n in dv.converted_nodes)] if len(dv.converted_nodes) > 1 else [])
