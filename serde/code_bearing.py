"""Members and fields a torch release would execute: error findings, never "valid", never written.

pt2x runs nothing from a file, but the files it passes on are loaded by torch, which runs
two kinds of content:

* **Pickles.** ``torch.export.load`` unpickles sample inputs with ``weights_only=True`` and,
  when that fails, again with ``weights_only=False``; ``use_pickle`` weights and constants and
  custom objects are unpickled with ``weights_only=False`` directly. Any global outside torch's
  ``weights_only`` allow-list (``codec.weights_only``) then runs (``posix.system`` and the
  like). Finding ``unsafe-pickle``, for every pickle in the archive: sample inputs, pickled
  payloads, the weight pickles of the older layouts, and extra or unrecognised members that
  are pickles or ``torch.save`` zips. A member torch unpickles that pt2x cannot scan (not a
  pickle, several pickles, bytes after the last one) is the same finding: not provably data.
* **Shape expressions.** torch's deserializer hands every ``SymExpr.expr_str`` to
  ``sympy.sympify``, which ``eval``s it. Finding ``bad-expression`` for text outside the
  restricted grammar of ``codec.symbolic``. The schema holds ``SymExpr`` only in tensor
  metadata (sizes, strides, storage offset) and in a graph's ``sym_*_values``
  (``EXPRESSION_FIELDS``); payload configs with an expression are refused when loading.

* **Compiled code.** An AOTInductor package (``archive.aoti``) is compiled code, not a program:
  finding ``aoti-package``; native code beside a program (``data/aotinductor/``, ExecuTorch)
  is ``native-code`` where pt2x would write it (``native_findings``): pt2x never passes it on.

``validate`` reports these (exit 1), ``pt2x scan`` gives such an artifact the verdict
``findings``, and the planner (``compat.plan``) blocks every write of it; the only thing a
write may drop instead is the sample inputs (``drop_sample_inputs``: written empty, as torch
writes a program without example inputs), which no program needs to run.
Torch-free; nothing is unpickled or evaluated here.
"""

from __future__ import annotations

from typing import Iterator

from ..schema import definitions as d
from ..schema.walk import subgraphs
from .errors import Pt2FormatError
from .findings import Finding

__all__ = [
    "UNSAFE_PICKLE",
    "BAD_EXPRESSION",
    "EXPRESSION_FIELDS",
    "SAMPLE_INPUTS",
    "code_findings",
    "native_findings",
    "aoti_findings",
    "AOTI_PACKAGE_CODE",
    "NATIVE_CODE",
    "pickle_findings",
    "expression_findings",
    "expression_sites",
    "graphs",
]

UNSAFE_PICKLE = "unsafe-pickle"
AOTI_PACKAGE_CODE = "aoti-package"
NATIVE_CODE = "native-code"
BAD_EXPRESSION = "bad-expression"
SAMPLE_INPUTS = "sample_inputs"  # the NotLoaded kind a write may drop

EXPRESSION_FIELDS = {
    "TensorMeta": ("sizes", "strides", "storage_offset"),
    "Graph": ("sym_int_values", "sym_bool_values", "sym_float_values"),
}
"""Where the schema holds a ``SymExpr`` (through ``SymInt``/``SymFloat``/``SymBool``); a test
checks this table against ``schema.definitions``."""

_TORCH_UNPICKLES = ("sample_inputs", "pickled_tensor", "custom_object", "opaque_object")
_LEGACY_PICKLES = ("data/weights/{}.pt", "data/constants/{}.pt")
_FLAT_PICKLES = ("serialized_state_dict.pt", "serialized_constants.pt")


def code_findings(archive, *, drop_sample_inputs: bool = False) -> list[Finding]:
    """Every pickle and expression of ``archive`` that torch would run (errors). With
    ``drop_sample_inputs``, sample inputs are left out (the caller does not write them)."""
    out = pickle_findings(archive, drop_sample_inputs=drop_sample_inputs)
    for model in archive.models.values():
        out.extend(expression_findings(model))
    return out


def aoti_findings(archive) -> list[Finding]:
    """``aoti-package`` when ``archive`` is an AOTInductor package (compiled models, no program)."""
    from .archive.loader import AOTI_PACKAGE, aoti_refusal

    if archive.layout != AOTI_PACKAGE:
        return []
    return [Finding("error", AOTI_PACKAGE_CODE, aoti_refusal(archive), f"{archive.root}/data/aotinductor/")]


def native_findings(archive) -> list[Finding]:
    """Blockers for writing ``archive``: an AOTInductor package, and each native-code member
    beside a program (compiled code pt2x cannot vouch for is never written)."""
    out = aoti_findings(archive)
    if not out:
        out = [Finding("error", NATIVE_CODE, f"{item.reason}; compiled code is never written by pt2x", item.member)
               for item in archive.unloaded if item.kind == "native_code"]
    return out


# ------------------------------------------------------------------------------ pickles


def _torch_pickles(archive, drop_sample_inputs: bool) -> Iterator[tuple[str, str]]:
    """(member, what it is) for every member torch unpickles when loading ``archive``."""
    prefix = f"{archive.root}/" if archive.root else ""
    for item in (*(p for m in archive.models.values() for p in m.pickled), *archive.unloaded):
        if item.kind in _TORCH_UNPICKLES and not (drop_sample_inputs and item.kind == SAMPLE_INPUTS):
            yield item.member, item.kind.replace("_", " ")
    for name in archive.models:
        for pattern in (*(prefix + p for p in _LEGACY_PICKLES), *_FLAT_PICKLES):
            member = pattern.format(name)
            if member in archive.zip:
                yield member, "weight pickle"


def _other_pickles(archive) -> Iterator[tuple[str, str]]:
    """(member, what it is) for extra and unrecognised members that are pickles or torch.save zips."""
    prefix = f"{archive.root}/" if archive.root else ""
    extra = [f"{prefix}extra/{n}" for n in archive.extra]
    for member in (*extra, *archive.unrecognized):
        if member in archive.zip and _looks_pickled(archive.zip, member):
            yield member, "extra member" if member in extra else "unrecognized member"


def _looks_pickled(zr, member: str) -> bool:
    """A pickle of protocol 2-5 or a zip (``torch.save``'s format), by its first bytes."""
    head = bytes(zr.view(member)[:4])
    return head == b"PK\x03\x04" or (len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5)


def pickle_findings(archive, *, drop_sample_inputs: bool = False) -> list[Finding]:
    """``unsafe-pickle`` for each pickle naming a global torch's ``weights_only`` load refuses,
    and for each member torch unpickles that pt2x cannot scan."""
    seen: set[str] = set()
    out: list[Finding] = []
    candidates = [(m, what, True) for m, what in _torch_pickles(archive, drop_sample_inputs)]
    candidates += [(m, what, False) for m, what in _other_pickles(archive)]
    for member, what, unpickled in candidates:
        if member in seen:
            continue
        seen.add(member)
        finding = _pickle_finding(archive.zip, member, what, unpickled)
        if finding is not None:
            out.append(finding)
    return out


def _pickle_finding(zr, member: str, what: str, unpickled: bool) -> Finding | None:
    """The finding for one member; ``unpickled``: torch unpickles it, so bytes pt2x cannot scan
    are a finding too (an extra file that only looks like a pickle is left alone)."""
    from .archive.payload import member_globals
    from .codec.weights_only import outside_weights_only

    if zr.size(member) == 0:
        return None  # torch reads an empty member as "none" (what it writes without sample inputs)
    try:
        names = member_globals(zr, member)  # scanned once per archive (loading described it already)
    except Pt2FormatError as e:
        if not unpickled:
            return None
        return Finding("error", UNSAFE_PICKLE, f"{what} torch would unpickle is not a pickle pt2x can scan "
                       f"({e.reason}); it cannot be shown to be data only", member)
    refused = outside_weights_only(names)
    if not refused:
        return None
    shown = ", ".join(refused[:8]) + (f" and {len(refused) - 8} more" if len(refused) > 8 else "")
    return Finding("error", UNSAFE_PICKLE, f"{what} pickle calls {shown}, outside torch's weights_only allow-list: "
                   "torch.load(weights_only=False) would run it", member)


# -------------------------------------------------------------------------- expressions


def graphs(graph: d.Graph, where: str = "graph_module.graph") -> Iterator[tuple[d.Graph, str]]:
    """``graph`` and every subgraph under it, each with its field path."""
    yield graph, where
    for n, node in enumerate(graph.nodes):
        for a, named in enumerate(node.inputs):
            for sub in subgraphs(named.arg):
                yield from graphs(sub.graph, f"{where}.nodes[{n}].inputs[{a}].arg.as_graph.graph")


def _tensor_meta_sites(meta: d.TensorMeta, where: str) -> Iterator[tuple[str, d.SymInt]]:
    for k, s in enumerate(meta.sizes):
        yield f"{where}.sizes[{k}]", s
    for k, s in enumerate(meta.strides):
        yield f"{where}.strides[{k}]", s
    yield f"{where}.storage_offset", meta.storage_offset


def expression_sites(model) -> Iterator[tuple[str, str]]:
    """(field path, ``expr_str``) of every shape expression in ``model``'s program, subgraphs too."""
    for graph, where in graphs(model.program.graph_module.graph):
        for name, meta in graph.tensor_values.items():
            for path, s in _tensor_meta_sites(meta, f"{where}.tensor_values[{name!r}]"):
                if s.type == "as_expr":
                    yield path, s.value.expr_str
        for field in EXPRESSION_FIELDS["Graph"]:
            for name, s in getattr(graph, field).items():
                if s.type == "as_expr":
                    yield f"{where}.{field}[{name!r}]", s.value.expr_str


def expression_findings(model) -> list[Finding]:
    """``bad-expression`` for each shape expression outside pt2x's grammar (never evaluated)."""
    from .codec.symbolic import parse_cached

    out: list[Finding] = []
    for path, text in expression_sites(model):
        try:
            parse_cached(text)
        except Pt2FormatError as e:
            out.append(Finding("error", BAD_EXPRESSION, e.reason, model.json_member, path))
    return out
