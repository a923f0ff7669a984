"""``pt2x inspect FILE [--json] [--graph OUT.svg|png|dot [--node-data ND.json]]``: what is in a .pt2 (or an
ExecuTorch .pte or .ptd), read without torch; ``--graph`` draws its main graph (``explorer.picture``).

Exit 0; 1 when the file holds what torch would execute: a shape expression the restricted
parser does not accept (shown as invalid, never evaluated: ``pt2x validate`` reports it as
``bad-expression``) or a pickle naming globals outside torch's ``weights_only`` allow-list
(``unsafe_pickles``; ``unsafe-pickle`` in ``validate``); 2 unreadable.
"""

from __future__ import annotations

import argparse

from .cli import check_input
from .terminal import json_text, printable as P, say
from .summary import archive_summary

_SHOWN_CHARS = 120  # of an invalid expression's text, in the text output
_AOTI_FACTS = ("platform", "machine", "device", "cpu_isa", "compute_capability")
# a .pte's instruction kinds, as the text output counts them
_INSTRUCTION_WORDS = {"KernelCall": "kernel calls", "DelegateCall": "delegate calls", "MoveCall": "moves",
                      "JumpFalseCall": "jumps", "FreeCall": "frees"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="show models, signature, shapes, ranges, ops and weights of a .pt2 (or a .pte, .ptd)")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="machine-readable output (stable keys; see docs/cli.md)")
    p.add_argument("--graph", default=None, metavar="OUT.svg|png|dot",
                   help="draw the program's graph, collapsed by module (Graphviz's dot; .dot without it)")
    p.add_argument("--node-data", default=None, metavar="NODE_DATA.json",
                   help="with --graph: color it by node data (pt2x verify --node-data)")
    p.set_defaults(func=run)


def _dim(x) -> str:
    return "<invalid>" if isinstance(x, dict) else P(x)


def _shape(e: dict) -> str:
    if "dtype" not in e:
        return ""
    return f"{P(e['dtype'])}[{', '.join(_dim(x) for x in e['shape'])}]"


def _quoted(text: str) -> str:
    """Untrusted text made safe for a terminal (escapes, no control characters) and shortened."""
    short = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."
    return ascii(short)


def run(args: argparse.Namespace) -> int:
    from ..serde import load
    from ..converters.pte.ptd_reader import is_ptd
    from ..converters.pte.reader import is_pte

    check_input(args.file)
    if args.graph is not None:
        return _draw(args)
    if args.node_data is not None:
        from ..serde.errors import Pt2UsageError

        raise Pt2UsageError("--node-data colors the picture --graph draws: give --graph OUT.svg too")
    if is_pte(args.file):
        return _run_pte(args)
    if is_ptd(args.file):
        return _run_ptd(args)
    with load(args.file) as archive:
        s = archive_summary(archive)
    invalid = sum(len(m["invalid_expressions"]) for m in s["models"].values())
    unsafe = len(s["unsafe_pickles"])
    if args.json:
        print(json_text(s, indent=2))
        return 1 if invalid or unsafe else 0
    _print_text(s)
    _print_aoti(s)
    if invalid:
        say(f"INVALID: {invalid} shape expression(s) pt2x cannot parse (shown as <invalid>, never evaluated)")
    if unsafe:
        say(f"UNSAFE: {unsafe} pickle(s) torch would run code from (never loaded by pt2x)")
    return 1 if invalid or unsafe else 0


def _draw(args: argparse.Namespace) -> int:
    """``--graph OUT``: the main graph as a picture (``explorer.picture``); exit 0, 2 unreadable."""
    import json

    from ..explorer import graphs
    from ..explorer.picture import write_picture
    from ..serde.errors import Pt2UsageError
    from .cli import check_output, writing

    check_output(args.graph)
    node_data = None
    if args.node_data is not None:
        check_input(args.node_data)
        try:
            with open(args.node_data, encoding="utf-8") as f:
                node_data = json.load(f)
        except (ValueError, UnicodeDecodeError) as e:
            raise Pt2UsageError(f"cannot read {args.node_data}: not JSON node data ({e})") from None
        if not isinstance(node_data, dict):
            raise Pt2UsageError(f"cannot read {args.node_data}: node data is a JSON object")
    main = graphs(args.file)[0]
    with writing(args.graph):
        write_picture(main, args.graph, node_data)
    say(f"wrote {P(args.graph)}")
    return 0


def _run_pte(args: argparse.Namespace) -> int:
    """An ExecuTorch program: read torch-free (``converters/pte/reader.py``); exit 0, 2 malformed."""
    from ..converters.pte.reader import read_pte

    s = read_pte(args.file)
    if args.json:
        print(json_text(s, indent=2))
        return 0
    h = s["extended_header"]
    say(f"{P(s['file'])}: ExecuTorch program ({s['file_identifier']}), schema version {s['schema_version']}, "
        f"{s['size']} bytes" + (f", flatbuffer {h['program_size']} bytes" if h else ", no extended header"))
    for plan in s["execution_plans"]:
        kinds = ", ".join(f"{n} {_INSTRUCTION_WORDS[k]}" for k, n in plan["instructions"].items() if n)
        say(f"\nexecution plan {P(repr(plan['name']))}: {plan['value_count']} values, "
            f"{plan['instruction_count']} instructions" + (f" ({kinds})" if kinds else ""))
        for io in ("inputs", "outputs"):
            say(f"  {io}:")
            for e in plan[io]:
                shape = f"{e['dtype']}[{', '.join(str(x) for x in e['sizes'])}] {e['shape_dynamism']}" \
                    if e["kind"] == "Tensor" else ""
                say(f"    {e['index']:>5}  {e['kind']:<8} {shape}".rstrip())
        say(f"  operators ({len(plan['operators'])}):")
        for op, n in plan["operators"].items():
            say(f"    {n:>5}  {P(op)}")
        for d in plan["delegates"]:
            say(f"  delegate {P(repr(d['id']))}: data {d['location']} {d['index']}")
        say(f"  non_const_buffer_sizes: {plan['non_const_buffer_sizes']}")
    for i, seg in enumerate(s["segments"]):
        say(f"segment {i}: offset {seg['offset']}, {seg['size']} bytes")
    say(f"constant buffers: {len(s['constant_buffers'])}, {s['constant_bytes']} bytes")
    for b in s["constant_buffers"]:
        say(f"  {b['index']:>5}  {b['bytes']:>10} bytes  {b['location']}")
    external = {e["key"]: e for plan in s["execution_plans"] for e in plan["external_tensors"]}
    if external:
        say(f"external tensors (read from a .ptd by key): {len(external)}")
        for key, e in external.items():
            say(f"  {P(key)}  {e['dtype']}[{', '.join(str(x) for x in e['sizes'])}]")
    blobs = {e["key"]: e for plan in s["execution_plans"] for e in plan["external_blobs"]}
    if blobs:
        say(f"delegate constants read from a .ptd by key: {len(blobs)}")
        for key, e in blobs.items():
            say(f"  {P(key)}  ({e['delegate']})")
    return 0


def _run_ptd(args: argparse.Namespace) -> int:
    """An ExecuTorch data file (FlatTensor): read torch-free (``converters/pte/ptd_reader.py``); exit 0, 2 malformed."""
    from ..converters.pte.ptd_reader import read_ptd

    s = read_ptd(args.file)
    if args.json:
        print(json_text(s, indent=2))
        return 0
    h = s["header"]
    say(f"{P(s['file'])}: ExecuTorch data ({s['file_identifier']}), schema version {s['schema_version']}, "
        f"{s['size']} bytes, flatbuffer {h['flatbuffer_size']} bytes, segments from byte {h['segment_base_offset']}")
    say(f"named data ({len(s['named_data'])}):")
    for e in s["named_data"]:
        layout = f"{e['dtype']}[{', '.join(str(x) for x in e['sizes'])}]" if "dtype" in e else "(no tensor layout)"
        say(f"  {P(e['key'])}  {layout}  segment {e['segment_index']}, {e['bytes']} bytes")
    say(f"segments: {len(s['segments'])}, {s['data_bytes']} bytes")
    return 0


def _print_aoti(s: dict) -> None:
    """An AOTInductor package: what it is, each compiled model's platform and device, its files."""
    from .terminal import printable

    if s["kind"] != "aoti-package":
        return
    say("AOTInductor package: compiled code (nothing loaded or run here); "
        "torch.export.save writes a file pt2x can check and convert")
    for name, m in s["aoti_models"].items():
        facts = ", ".join(f"{key} {printable(m[key])}" for key in _AOTI_FACTS if m.get(key))
        say(f"  compiled model {printable(repr(name))}: {facts or 'no metadata'}")
        for member, size in m["files"].items():
            say(f"    {size:>10}  {printable(member)}")
        for error in m["metadata_errors"]:
            say(f"    metadata not read: {printable(error)}")


def _print_text(s: dict) -> None:
    say(f"{P(s['file'])}: layout {P(s['layout'])}, {len(s['models'])} model(s)")
    for name, m in s["models"].items():
        say(f"\nmodel {P(repr(name))}: schema {P(m['schema_version'])}, written by torch {P(m['torch_version'])}, "
            f"verifiers {P(m['verifiers'])}")
        say(f"  inputs:")
        for e in m["inputs"]:
            tgt = f" -> {P(e['target'])}" if "target" in e else ""
            say(f"    {P(e['kind']):<16} {P(e.get('name'))}{tgt} {_shape(e)}".rstrip())
        say(f"  outputs:")
        for e in m["outputs"]:
            tgt = f" -> {P(e['target'])}" if "target" in e else ""
            say(f"    {P(e['kind']):<16} {P(e.get('name'))}{tgt} {_shape(e)}".rstrip())
        if m["range_constraints"]:
            say("  range constraints:")
            for sym, (lo, hi) in m["range_constraints"].items():
                say(f"    {lo if lo is not None else '-inf'} <= {P(sym)} <= {hi if hi is not None else 'inf'}")
        say(f"  nodes: {m['node_count']}")
        for op, n in m["ops"].items():
            say(f"    {n:>5}  {P(op)}")
        say(f"  module call graph: {', '.join(P(e['fqn'] or '<root>') for e in m['module_call_graph'])}")
        say(f"  weights: {m['weights']['count']} tensors, {m['weights']['bytes']} bytes; constants: {m['constants']['count']} tensors, {m['constants']['bytes']} bytes")
        for x in m["not_loaded"]:
            say(f"  not loaded: {P(x['member'])}{' (' + P(x['fqn']) + ')' if x['fqn'] else ''}: {P(x['reason'])}")
        for f in m["unknown_fields"]:
            say(f"  unknown field (kept): {P(f)}")
        for x in m["invalid_expressions"]:
            say(f"  invalid shape expression: {P(x['path'])}: {_quoted(x['text'])}: {P(x['error'])}")
    for x in s["not_loaded"]:
        say(f"not loaded: {P(x['member'])}: {P(x['reason'])}")
    for n in s["unrecognized_members"]:
        say(f"unrecognized member (kept, not interpreted): {P(n)}")
    if s["extra_files"]:
        say(f"extra files: {', '.join(P(x) for x in s['extra_files'])}")
    for x in s["unsafe_pickles"]:
        say(f"unsafe pickle: {P(x['member'])}: {P(x['error'])}")
