"""``pt2x convert FILE --to onnx|tflite|pte|pt2 -o OUT``: dispatch to the converters.

``--to tflite`` also takes an ``.onnx`` file (from pt2x or anywhere). ``--to pte`` writes an
ExecuTorch program; ``--max-dim NAME=N`` bounds a shape symbol torch left unbounded;
``--external-weights`` writes the weights to ``OUT.ptd`` beside it (``M.pte`` -> ``M.ptd``).
``--to pt2 --target-schema M.N`` writes a copy an older torch reads, through the one
planner in ``serde.compat.plan`` (the one ``validate --target`` and ``save(target_schema=)``
use); its findings go to stderr, and exit 1 means a blocker (nothing written).

The options, the input and output paths are checked before any work (exit 2, one line naming
the path): an option of another target (``--opset`` is ONNX's, ``--nhwc-io`` TFLite's, ``--max-dim`` and
``--external-weights`` PTE's,
``--weights`` ONNX's and TFLite's, ``--target-schema`` pt2's) and an ONNX input to anything but TFLite are usage errors; a missing
extra names the one to install (``pip install 'pt2x[onnx]'``). Outputs are written atomically
(``serde.atomic_write``): a failed write leaves the old file, and a FIFO or device is refused.
``--verify`` (``--to onnx|tflite|pte`` from a .pt2) then runs ``pt2x verify`` on the written file:
exit 1 when it differs from the program, the file staying written.
"""

from __future__ import annotations

import argparse
import sys

from ..serde.errors import Pt2UsageError
from .cli import check_input, check_output, writing
from .conversion_progress import ConversionProgress
from .cmd_verify import add_verify_options
from .cmd_verify import report as verify_report
from .terminal import printable, say


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert a .pt2 program to ONNX, TFLite, or a .pt2 for an older release")
    p.add_argument("file", help="input .pt2 (or .onnx with --to tflite)")
    p.add_argument("--to", required=True, choices=("onnx", "tflite", "pte", "pt2"), help="output format")
    p.add_argument("-o", "--output", required=True, help="output path")
    p.add_argument("--model", default=None, help="model name inside a multi-model archive (default: the only one, or 'model')")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset (default: the converter's)")
    p.add_argument("--target-schema", default=None, help="pt2 only: schema version or torch release to write for, e.g. 8.15, torch==2.8, 2.6")
    p.add_argument("--max-dim", action="append", default=None, metavar="NAME=N",
                   help="pte only: the upper bound of shape symbol NAME (s77) that torch left unbounded "
                        "(ExecuTorch plans a dynamic tensor at its largest size); repeatable")
    p.add_argument("--external-weights", action="store_true",
                   help="pte only: write the weights to OUT.ptd beside the program (ExecuTorch's FlatTensor file, "
                        "keyed by their names, as exir's external_constants=True)")
    p.add_argument("--delegate", choices=("xnnpack", "none"), default=None,
                   help="pte only: run what XNNPACK takes in XnnpackBackend payloads, the rest on the portable "
                        "kernels (xnnpack, the default), or portable kernels only (none)")
    p.add_argument("--nhwc-io", action="store_true", help="tflite only: every 4-D input and output channels-last (NHWC)")
    p.add_argument("--weights", choices=("fp16", "int8"), default=None,
                   help="onnx/tflite: store the weights as float16, or as per-channel int8 (dynamic range), "
                        "activations staying float32 (default: float32 weights)")
    p.add_argument("--external-data", action="store_true",
                   help="onnx only: write the weights to OUT.data beside the model (done unasked past protobuf's 2 GiB)")
    p.add_argument("--state", choices=("outputs", "inputs"), default=None,
                   help="onnx/tflite: buffers the program writes (a KV cache) are extra outputs (default), or "
                        "also inputs named after them, so a decode loop feeds each step's outputs back")
    p.add_argument("--drop-sample-inputs", action="store_true",
                   help="pt2 only: write the sample inputs empty (torch 2.9+ layouts), e.g. when they are an unsafe pickle")
    p.add_argument("--verify", action="store_true",
                   help="onnx/tflite/pte from a .pt2: run the written file against the program (as pt2x verify); exit 1 if it differs")
    add_verify_options(p)
    p.set_defaults(func=run)


_ONLY_FOR = {"max_dim": "pte", "external_weights": "pte", "delegate": "pte", "opset": "onnx", "external_data": "onnx", "nhwc_io": "tflite", "target_schema": "pt2", "drop_sample_inputs": "pt2",
             "weights": ("onnx", "tflite"), "verify": ("onnx", "tflite", "pte"),
             "state": ("onnx", "tflite")}
"""Each target's own options (attribute -> the ``--to`` it applies to): given with another
target, an option would be silently ignored, so it is a usage error."""


def _check_options(args: argparse.Namespace) -> None:
    for option, target in _ONLY_FOR.items():
        targets = (target,) if isinstance(target, str) else target
        if getattr(args, option, None) not in (None, False) and args.to not in targets:
            raise Pt2UsageError(f"--{option.replace('_', '-')} applies only to --to {' or '.join(targets)}, "
                                f"not --to {args.to}")


def _check_input_format(path: str, to: str) -> None:
    """An ONNX file (named ``.onnx``, not a zip) converts only to TFLite: say so, rather than that
    it is not a readable .pt2."""
    if to == "tflite" or not path.lower().endswith(".onnx"):
        return
    with open(path, "rb") as f:
        if f.read(2) == b"PK":  # a zip: a .pt2 whatever its name
            return
    raise Pt2UsageError(f"cannot convert {path} to {to}: it is an ONNX model, which pt2x converts only to "
                        "TFLite (--to tflite)")


def _converter(to: str):
    """The function writing format ``to``: ``(src, dst, args) -> exit code``. Imports its extra."""
    if to == "onnx":
        from ..converters import to_onnx
        from ..converters.onnx.weight_only import describe_weights

        def convert(src, dst, args):
            kw = {} if args.opset is None else {"opset": args.opset}
            with ConversionProgress(f"converting {printable(src)} to ONNX") as shown:
                m = to_onnx(src, dst, model=args.model or "model", weights=args.weights,
                            external_data=True if args.external_data else None, progress=shown.bytes,
                            state=args.state or "outputs", **kw)
            say(f"wrote {printable(dst)}")
            for line in describe_weights(m):  # --weights: what was stored, what stayed float32
                say(printable(line))
            return 0

    elif to == "tflite":
        from ..converters import to_tflite
        from ..converters.tflite.quant.qdq_pass import describe_tflite
        from ..converters.tflite.quant.weight_storage import describe_weights

        def convert(src, dst, args):
            with ConversionProgress(f"converting {printable(src)} to TFLite") as shown:
                data = to_tflite(src, dst, model=args.model or "model", nhwc_io=args.nhwc_io, weights=args.weights,
                                 progress=shown.bytes, state=args.state or "outputs")
            say(f"wrote {printable(dst)}")
            for line in describe_tflite(data):  # a QDQ model: which ops run in int8, which stay float
                say(printable(line))
            for line in describe_weights(data):  # --weights: what was stored, what stayed float32
                say(printable(line))
            return 0

    elif to == "pte":
        from ..converters import to_pte
        from ..converters.pte.ptd import ptd_path

        def convert(src, dst, args):
            max_dims = _max_dims(args.max_dim)
            data = ptd_path(dst) if args.external_weights else None
            if data is not None:
                check_output(data)
            with ConversionProgress(f"converting {printable(src)} to ExecuTorch"):
                to_pte(src, dst, model=args.model or "model", max_dims=max_dims, external_weights=args.external_weights,
                       **({"delegate": args.delegate} if args.delegate else {}))
            say(f"wrote {printable(dst)}")
            if data is not None:
                say(_data_written(dst, data))
            return 0

    else:

        def convert(src, dst, args):
            return _write_pt2_for_target(src, dst, args.target_schema, args.drop_sample_inputs)

    return convert


def _data_written(pte: str, data: str) -> str:
    """What ``--external-weights`` wrote beside the program (read back from the two files)."""
    from ..converters.pte.ptd_reader import read_ptd, reads_data
    from ..converters.pte.reader import read_pte

    if not reads_data(read_pte(pte)):
        return "the program reads no weight a .ptd would hold: no .ptd written"
    s = read_ptd(data)
    return f"wrote {printable(data)} ({len(s['named_data'])} entries, {s['data_bytes']} bytes)"


def _max_dims(items: list[str] | None) -> dict[str, int]:
    """``--max-dim s77=64`` (repeatable) as ``{"s77": 64}``; a malformed one is a usage error."""
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit() or int(value) < 1:
            raise Pt2UsageError(f"--max-dim {item!r}: expected NAME=N with N a positive integer (e.g. s77=64)")
        out[name.strip()] = int(value)
    return out


def _write_pt2_for_target(src: str, dst: str, target_schema: str | None, drop_sample_inputs: bool = False) -> int:
    """``--to pt2``: ``src`` rewritten for ``--target-schema`` (``serde.compat.plan``). 0 written, 1 blocked.

    Findings (blockers and warnings) go to stderr; on a blocker no file is written.
    """
    from ..serde.compat.plan import TargetNotWritable, write_for_target
    from ..serde.compat.releases import parse_target

    if not target_schema:
        raise Pt2UsageError("--target-schema is required with --to pt2 (e.g. 8.15 or torch==2.10)")
    version = parse_target(target_schema)
    try:
        plan = write_for_target(src, dst, version, drop_sample_inputs=drop_sample_inputs)
    except TargetNotWritable as e:
        for f in e.findings:
            say(printable(f), file=sys.stderr)
        say(f"not written: {printable(src)} cannot be made readable by schema {version[0]}.{version[1]}", file=sys.stderr)
        return 1
    for f in plan.findings:
        say(printable(f), file=sys.stderr)
    say(f"wrote {printable(dst)} for schema {version[0]}.{version[1]}")
    return 0


def run(args: argparse.Namespace) -> int:
    _check_options(args)
    convert = _converter(args.to)
    check_input(args.file)
    _check_input_format(args.file, args.to)
    check_output(args.output)
    _check_verify_options(args)
    with writing(args.output):
        code = convert(args.file, args.output, args)
    return _verified(args) if code == 0 and args.verify else code


def _check_verify_options(args: argparse.Namespace) -> None:
    if args.verify and args.file.lower().endswith(".onnx") and not _is_zip(args.file):
        raise Pt2UsageError("--verify checks a conversion from a .pt2 program; for an .onnx input run the "
                            "ONNX file and the .tflite side by side")
    if not args.verify and (args.inputs is not None or args.seed != 0 or args.reference != "auto"):
        raise Pt2UsageError("--inputs, --seed and --reference apply only with --verify")


def _is_zip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"PK"


def _verified(args: argparse.Namespace) -> int:
    """``pt2x verify`` of the file just written; on a difference the file stays, and stderr says so."""
    if args.weights:
        say(f"note: the weights are stored as {args.weights}: the file differs from the program by their rounding, "
            "and is held to float tolerances")
    code = verify_report(args.file, args.output, args)
    if code != 0:
        say(f"the converted file differs from the program; it stays written: {printable(args.output)}", file=sys.stderr)
    return code
