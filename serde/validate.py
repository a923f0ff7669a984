"""Structural and referential checks of a loaded archive (``pt2x validate``).

What a reader downstream relies on: every value a node reads is produced exactly once
and before use; signature specs name real graph inputs/outputs; every parameter,
buffer and constant has its bytes, with the shape and dtype the graph says; every
symbol in a shape has a range constraint; subgraphs obey the same rules; member
CRCs match; nothing torch would execute (``code_bearing``: pickles outside torch's
``weights_only`` allow-list, shape expressions outside pt2x's grammar). Returns findings; never raises for a bad program (only for unreadable files,
which ``load`` already refused).
"""

from __future__ import annotations

from typing import Iterable

from ..schema import definitions as d
from ..schema.walk import input_spec_parts, output_spec_parts, subgraphs, value_refs
from .archive.loader import Pt2Archive, Pt2Model
from .archive.tensor_data import numpy_dtype
from .code_bearing import aoti_findings, expression_findings, expression_sites, pickle_findings
from .errors import Pt2FormatError
from .findings import Finding

__all__ = ["validate_archive", "validate_model"]


def validate_archive(archive: Pt2Archive, *, check_crc: bool = True) -> list[Finding]:
    out: list[Finding] = []
    for name in archive.unrecognized:
        out.append(Finding("warning", "unrecognized-member", "member not part of the PT2 layout; kept, not interpreted", name))
    if check_crc:
        for name in archive.members:
            if not name.endswith("/") and not archive.zip.crc_ok(name):
                out.append(Finding("error", "crc-mismatch", "member bytes do not match their CRC-32 (corrupt file)", name))
    for model in archive.models.values():
        out.extend(validate_model(model))
    out.extend(pickle_findings(archive))
    out.extend(aoti_findings(archive))
    return out


def validate_model(model: Pt2Model) -> list[Finding]:
    member = model.json_member
    out: list[Finding] = []
    for f in model.unknown_fields:
        out.append(Finding("warning", "unknown-field", f"field {f} is not in pt2x's schema; kept and written back", member))
    gm = model.program.graph_module
    _check_graph(gm.graph, "graph_module.graph", member, out)
    _check_signature(model, out)
    _check_weights(model, out)
    _check_symbols(model, out)
    out.extend(expression_findings(model))
    return out


# ----------------------------------------------------------------------------- graph


def _check_graph(graph: d.Graph, where: str, member: str, out: list[Finding]) -> None:
    defined: dict[str, str] = {}

    def define(name: str, path: str) -> None:
        if name in defined:
            out.append(Finding("error", "redefined-value", f"value {name!r} is produced more than once (first at {defined[name]})", member, path))
        else:
            defined[name] = path

    for i, arg in enumerate(graph.inputs):
        for _, name in value_refs(arg):
            define(name, f"{where}.inputs[{i}]")
    for n, node in enumerate(graph.nodes):
        npath = f"{where}.nodes[{n}]"
        if not node.target:
            out.append(Finding("error", "empty-target", "node has no target", member, npath))
        for a, named in enumerate(node.inputs):
            for _, name in value_refs(named.arg):
                if name not in defined:
                    out.append(Finding("error", "undefined-value", f"node {node.name or n!r} ({node.target}) reads {name!r}, which no earlier node or input produces", member, f"{npath}.inputs[{a}]"))
            for sub in subgraphs(named.arg):
                _check_graph(sub.graph, f"{npath}.inputs[{a}].arg.as_graph.graph", member, out)
        for o, arg in enumerate(node.outputs):
            for kind, name in value_refs(arg):
                define(name, f"{npath}.outputs[{o}]")
                if kind == "tensor" and name not in graph.tensor_values:
                    out.append(Finding("error", "missing-tensor-meta", f"tensor {name!r} has no entry in tensor_values", member, f"{npath}.outputs[{o}]"))
    for i, arg in enumerate(graph.outputs):
        for _, name in value_refs(arg):
            if name not in defined:
                out.append(Finding("error", "undefined-value", f"graph output {name!r} is never produced", member, f"{where}.outputs[{i}]"))


# ------------------------------------------------------------------------- signature


def _names(args: Iterable[d.Argument]) -> list[str | None]:
    """The first value each argument names (None for a literal)."""
    return [next((name for _, name in value_refs(a)), None) for a in args]


def _check_signature(model: Pt2Model, out: list[Finding]) -> None:
    member = model.json_member
    gm = model.program.graph_module
    sig = gm.signature
    inputs = _names(gm.graph.inputs)
    outputs = _names(gm.graph.outputs)
    if len(sig.input_specs) != len(inputs):
        out.append(Finding("error", "signature-mismatch", f"{len(sig.input_specs)} input specs for {len(inputs)} graph inputs", member, "graph_module.signature.input_specs"))
    for i, spec in enumerate(sig.input_specs):
        kind, name, _ = input_spec_parts(spec)
        if kind == "constant_input" or name is None:
            continue  # a constant user input (int, str...) has no value name
        if i >= len(inputs) or inputs[i] != name:
            out.append(Finding("error", "signature-mismatch", f"input spec names {name!r} but graph input {i} is {inputs[i] if i < len(inputs) else 'missing'!r}", member, f"graph_module.signature.input_specs[{i}]"))
    if len(sig.output_specs) != len(outputs):
        out.append(Finding("error", "signature-mismatch", f"{len(sig.output_specs)} output specs for {len(outputs)} graph outputs", member, "graph_module.signature.output_specs"))
    for i, spec in enumerate(sig.output_specs):
        name = output_spec_parts(spec).name
        if name is not None and (i >= len(outputs) or outputs[i] != name):
            out.append(Finding("error", "signature-mismatch", f"output spec names {name!r} but graph output {i} is {outputs[i] if i < len(outputs) else 'missing'!r}", member, f"graph_module.signature.output_specs[{i}]"))


# --------------------------------------------------------------------------- weights


def _stored(model: Pt2Model):
    """(spec index, fqn, graph value name, store) for every input backed by stored bytes."""
    pickled = {p.fqn for p in model.pickled if p.fqn}
    for i, spec in enumerate(model.program.graph_module.signature.input_specs):
        kind, name, fqn = input_spec_parts(spec)
        if kind == "parameter":
            yield i, fqn, name, model.state_dict, pickled
        elif kind == "buffer":
            yield i, fqn, name, (model.state_dict if spec.value.persistent else model.constants), pickled
        elif kind == "tensor_constant":
            yield i, fqn, name, model.constants, pickled
        elif kind == "custom_obj":
            yield i, fqn, None, None, pickled


def _check_weights(model: Pt2Model, out: list[Finding]) -> None:
    member = model.json_member
    tv = model.program.graph_module.graph.tensor_values
    for i, fqn, value, store, pickled in _stored(model):
        path = f"graph_module.signature.input_specs[{i}]"
        if store is None:  # custom object: bytes are a pickle, listed not loaded
            if fqn not in pickled:
                out.append(Finding("error", "missing-weight", f"custom object {fqn!r} has no payload", member, path))
            continue
        if fqn in pickled:
            continue
        arr = store.get(fqn)
        if arr is None:
            out.append(Finding("error", "missing-weight", f"{fqn!r} has no stored bytes", member, path))
            continue
        meta = tv.get(value)
        if meta is None:
            out.append(Finding("error", "missing-tensor-meta", f"input {value!r} ({fqn}) has no tensor_values entry", member, path))
            continue
        try:
            want_dtype = numpy_dtype(meta.dtype)
        except Pt2FormatError as e:
            out.append(Finding("error", "bad-dtype", e.reason, member, f"graph_module.graph.tensor_values[{value!r}].dtype"))
            continue
        sizes = [s.value if s.type == "as_int" else None for s in meta.sizes]
        where = model.tensor_members.get(fqn, member)
        if arr.dtype != want_dtype:
            out.append(Finding("error", "weight-mismatch", f"{fqn!r} is stored as {arr.dtype}, the graph says {want_dtype}", where))
        if len(sizes) != arr.ndim or any(s is not None and s != n for s, n in zip(sizes, arr.shape)):
            out.append(Finding("error", "weight-mismatch", f"{fqn!r} is stored with shape {list(arr.shape)}, the graph says {sizes}", where))


# ---------------------------------------------------------------------------- shapes


def _check_symbols(model: Pt2Model, out: list[Finding]) -> None:
    """Every symbol a parseable shape expression uses has a range constraint (text the parser
    refuses is ``bad-expression``, from ``code_bearing``)."""
    from .codec.symbolic import parse_cached

    member = model.json_member
    ranges = model.program.range_constraints
    missing: dict[str, str] = {}
    for path, text in expression_sites(model):
        try:
            expr = parse_cached(text)
        except Pt2FormatError:
            continue
        for sym in expr.free_symbols:
            if sym not in ranges:
                missing.setdefault(sym, path)
    for sym, path in missing.items():
        out.append(Finding("error", "unranged-symbol", f"symbol {sym!r} has no range constraint", member, path))
