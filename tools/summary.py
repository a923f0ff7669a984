"""A loaded archive as a plain, JSON-able summary: what ``pt2x inspect`` prints.

The ``--json`` output is this dict; its keys are documented in docs/cli.md and stable.
Shape expressions go through the restricted parser only (``serde.symbolic``): text it
refuses is shown as ``{"invalid": text, "error": why}`` and listed in the model's
``invalid_expressions``; nothing is ever evaluated.
"""

from __future__ import annotations

from collections import Counter

from ..schema import definitions as d
from ..serde.archive.loader import AOTI_PACKAGE, Pt2Archive, Pt2Model
from ..serde.errors import Pt2FormatError
from ..schema.walk import input_spec_parts, output_spec_parts, subgraphs
from ..serde.code_bearing import pickle_findings, expression_sites
from ..serde.codec.symbolic import parse_cached, to_infix


def dim_text(s: d.SymInt) -> int | str | dict:
    """A size as an int, its expression's text (``s77``, ``2*s0 + 1``), or, for text the
    restricted parser refuses, ``{"invalid": text, "error": why}`` (never evaluated)."""
    if s.type == "as_int":
        return s.value
    text = s.value.expr_str
    try:
        return to_infix(parse_cached(text))
    except Pt2FormatError as e:
        return {"invalid": text, "error": e.reason}


def invalid_expressions(model: Pt2Model) -> list[dict]:
    """Every shape expression in the model (tensor sizes, strides, offsets, ``sym_*_values``;
    subgraphs too) the parser refuses, as ``{"member", "path", "text", "error"}``: the ones
    ``validate`` reports as ``bad-expression`` (torch's loader would ``eval`` them)."""
    out: list[dict] = []
    for path, text in expression_sites(model):
        try:
            parse_cached(text)
        except Pt2FormatError as e:
            out.append({"member": model.json_member, "path": path, "text": text, "error": e.reason})
    return out


def _tensor(meta: d.TensorMeta | None) -> dict:
    if meta is None:
        return {}
    return {"dtype": meta.dtype.name.lower(), "shape": [dim_text(s) for s in meta.sizes]}


def _op_counts(graph: d.Graph, counts: Counter) -> int:
    n = 0
    for node in graph.nodes:
        counts[node.target] += 1
        n += 1
        for named in node.inputs:
            for sub in subgraphs(named.arg):
                n += _op_counts(sub.graph, counts)
    return n


def _spec_entry(parts, g: d.Graph) -> dict:
    """An input/output spec as ``{"kind", "name", "target"?, "dtype"?, "shape"?}``."""
    entry = {"kind": parts.kind, "name": parts.name}
    if parts.target:
        entry["target"] = parts.target
    entry.update(_tensor(g.tensor_values.get(parts.name)) if parts.name else {})
    return entry


def model_summary(model: Pt2Model) -> dict:
    p = model.program
    g = p.graph_module.graph
    counts: Counter = Counter()
    total = _op_counts(g, counts)
    inputs = []
    for spec in p.graph_module.signature.input_specs:
        parts = input_spec_parts(spec)
        if parts.kind == "constant_input":
            inputs.append({"kind": parts.kind, "name": parts.name, "value": spec.value.value.value})
        else:
            inputs.append(_spec_entry(parts, g))
    outputs = [_spec_entry(output_spec_parts(spec), g) for spec in p.graph_module.signature.output_specs]
    return {
        "schema_version": "%d.%d" % model.schema_version,
        "torch_version": p.torch_version,
        "verifiers": list(p.verifiers),
        "opset_version": dict(p.opset_version),
        "node_count": total,
        "ops": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        "inputs": inputs,
        "outputs": outputs,
        "range_constraints": {k: [r.min_val, r.max_val] for k, r in p.range_constraints.items()},
        "module_call_graph": [
            {"fqn": e.fqn, "forward_arg_names": e.signature.forward_arg_names if e.signature else None}
            for e in p.graph_module.module_call_graph
        ],
        "weights": {"count": len(model.state_dict), "bytes": sum(a.nbytes for a in model.state_dict.values())},
        "constants": {"count": len(model.constants), "bytes": sum(a.nbytes for a in model.constants.values())},
        "not_loaded": [x.as_dict() for x in model.pickled],
        "unknown_fields": list(model.unknown_fields),
        "invalid_expressions": invalid_expressions(model),
    }


def archive_summary(archive: Pt2Archive) -> dict:
    return {
        "file": archive.source,
        "kind": "aoti-package" if archive.layout == AOTI_PACKAGE else "exported-program",
        "layout": archive.layout,
        "archive_version": archive.archive_version,
        "models": {name: model_summary(m) for name, m in archive.models.items()},
        "extra_files": sorted(archive.extra),
        "not_loaded": [x.as_dict() for x in archive.unloaded],
        "unrecognized_members": list(archive.unrecognized),
        "unsafe_pickles": [{"member": f.member, "error": f.message} for f in pickle_findings(archive)],
        "aoti_models": {name: m.as_dict() for name, m in archive.aoti_models.items()},
    }
