"""``pt2x convert FILE --to onnx|tflite|pt2 -o OUT``: dispatch to the converters."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert a .pt2 program to ONNX, TFLite, or a .pt2 for an older release")
    p.add_argument("file", help="input .pt2")
    p.add_argument("--to", required=True, choices=("onnx", "tflite", "pt2"), help="output format")
    p.add_argument("-o", "--output", required=True, help="output path")
    p.add_argument("--model", default=None, help="model name inside a multi-model archive (default: the only one, or 'model')")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset (default: the converter's)")
    p.add_argument("--target-schema", default=None, help="pt2 only: schema version to write for, e.g. 8.15")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.to == "onnx":
        from ..converters import to_onnx

        kw = {} if args.opset is None else {"opset": args.opset}
        to_onnx(args.file, args.output, model=args.model or "model", **kw)
    elif args.to == "tflite":
        from ..converters import to_tflite

        to_tflite(args.file, args.output, model=args.model or "model")
    else:
        from ..serde.rewrite import rewrite_for_target

        return rewrite_for_target(args.file, args.output, target_schema=args.target_schema)
    print(f"wrote {args.output}")
    return 0
