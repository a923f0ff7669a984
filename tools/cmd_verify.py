"""``pt2x verify MODEL.pt2 CONVERTED.onnx|.tflite|.pte [--data M.ptd] [--inputs X.npz] [--locate [--node-data OUT.json]] [--json]``.

Runs the converted file (ONNX Runtime, LiteRT as shipped in a child process, or ExecuTorch's
runtime in a child process, a ``.pte``'s ``.ptd`` beside it or ``--data``) against a
reference (torch eager when torch is importable, else pt2x's own ONNX; ``--reference onnx``
forces the latter) on the archive's sample inputs, inputs drawn from the signature (``--seed``),
or ``--inputs``; prints each output's max abs/rel difference and the tolerance used, and with
``--locate`` the first diverging value with its ATen node, module path and converted node/op.
With ``--node-data``, also writes Model Explorer node data of every compared value
(``explorer.overlay``). Exit 0 equal, 1 different, 2 a file or input that cannot be used (one
line, no traceback).
On a terminal, a run past a few seconds shows a progress line (``conversion_progress``).
``add_verify_options``/``report`` are shared with ``pt2x convert --verify``.
"""

from __future__ import annotations

import argparse

from .cli import check_input
from .conversion_progress import ConversionProgress
from .terminal import json_text, printable, say

EXIT_EQUAL, EXIT_DIFFERENT = 0, 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check a converted .onnx/.tflite/.pte against the program (and --locate where it differs)")
    p.add_argument("model", help="the .pt2 program")
    p.add_argument("converted", help="the converted .onnx, .tflite or .pte (pt2x's, or another tool's)")
    p.add_argument("--data", default=None, metavar="FILE.ptd",
                   help="for a .pte: the .ptd its external weights are read from (default: the one beside it)")
    p.add_argument("--model", dest="model_name", default="model", help="model name inside a multi-model archive")
    p.add_argument("--locate", action="store_true", help="compare intermediate values and name the first that differs")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--node-data", default=None, metavar="OUT.json",
                   help="with --locate: write Model Explorer node data, each node's error over its tolerance (OUT.json "
                        "for the program's graph; OUT.max_abs.json, OUT.max_rel.json; OUT.onnx|tflite.json for the "
                        "converted file's)")
    add_verify_options(p)
    p.set_defaults(func=run)


def add_verify_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inputs", default=None, metavar="FILE.npz",
                   help="inputs to run on: arrays named as the program's inputs, or arr_0, arr_1, ... in order")
    p.add_argument("--seed", type=int, default=0, help="seed of the drawn inputs (when the archive has no sample inputs)")
    p.add_argument("--reference", choices=("auto", "onnx"), default="auto",
                   help="auto: torch eager when torch is importable, else pt2x's ONNX; onnx: pt2x's ONNX")


def report(model: str, converted: str, args: argparse.Namespace, *, locate: bool = False, as_json: bool = False) -> int:
    """Verify ``converted`` against ``model``, print the report; exit 0 equal, 1 different."""
    from ..verification import verify

    if args.inputs is not None:
        check_input(args.inputs)
    node_data = getattr(args, "node_data", None)
    model_name = getattr(args, "model_name", None) or getattr(args, "model", None) or "model"
    with ConversionProgress(f"verifying {printable(converted)} against {printable(model)}"):
        r = verify(model, converted, args.inputs, locate=locate, seed=args.seed, model_name=model_name,
                   use_torch=args.reference == "auto", data=getattr(args, "data", None))
        if node_data is not None:
            _write_node_data(r, model, converted, node_data, model_name)
    if as_json:
        say(json_text(r.as_dict()))
    else:
        say(r.table(escape=printable))
    return EXIT_EQUAL if r.ok else EXIT_DIFFERENT


def _write_node_data(r, model: str, converted: str, out: str, model_name: str) -> None:
    """The Model Explorer node data of a located report, each file written atomically."""
    from ..explorer.overlay import overlay_files
    from ..serde.atomic_write import write_atomically
    from .cli import writing

    for path, data in overlay_files(r, model, converted, out, model_name):
        with writing(path):
            write_atomically(path, lambda f, data=data: f.write(json_text(data, indent=1).encode()))


def run(args: argparse.Namespace) -> int:
    from ..serde.errors import Pt2UsageError
    from .cli import check_output

    check_input(args.model)
    check_input(args.converted)
    if args.data is not None:
        check_input(args.data)
    if args.node_data is not None:
        if not args.locate:
            raise Pt2UsageError("--node-data needs --locate (the per-node errors are those --locate compares)")
        check_output(args.node_data)
    return report(args.model, args.converted, args, locate=args.locate, as_json=args.json)
