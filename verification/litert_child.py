"""The LiteRT child of ``runners.run_litert``: ``python -m pt2x.verification.litert_child DIR N EVERY``.

Reads ``DIR/model.tflite`` and ``DIR/in<i>.npz`` (``arr_0..``, in input order) for ``i < N``,
runs each set in LiteRT as shipped (the default delegate XNNPACK, one thread), and writes
``DIR/out<i>.npz`` (``o<j>``: output j; with EVERY=1 also ``t<k>``: tensor k) and last
``DIR/result.json`` (input and output names, tensor names by index, the operators in execution
order; or ``error``: LiteRT's own refusal). A process that dies writes no ``result.json``.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np


def _interpreter(path: str, every: bool):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Interpreter(model_path=path, num_threads=1, experimental_op_resolver_type=OpResolverType.AUTO,
                           experimental_preserve_all_tensors=every)


def _fits(shape, signature) -> bool:
    return len(shape) == len(signature) and all(s in (-1, n) for n, s in zip(shape, signature))


def _channels_last(x: np.ndarray, signature) -> bool:
    """``x`` is 4-D and the file declares that input channels-last (``nhwc_io``): it fits only transposed."""
    return x.ndim == 4 and not _fits(x.shape, signature) and _fits(x.transpose(0, 2, 3, 1).shape, signature)


def _run_set(it, feeds: list[np.ndarray], every: bool) -> tuple[dict[str, np.ndarray], list[int]]:
    details = it.get_input_details()
    if len(details) != len(feeds):
        raise ValueError(f"the model has {len(details)} inputs, {len(feeds)} given")
    nhwc = [i for i, (x, dt) in enumerate(zip(feeds, details)) if _channels_last(x, dt["shape_signature"])]
    feeds = [x.transpose(0, 2, 3, 1) if i in nhwc else x for i, x in enumerate(feeds)]
    for dt, x in zip(details, feeds):
        it.resize_tensor_input(dt["index"], list(x.shape), strict=False)
    it.allocate_tensors()
    for dt, x in zip(details, feeds):
        it.set_tensor(dt["index"], np.array(x, dtype=dt["dtype"], order="C"))
    it.invoke()
    out = {f"o{j}": np.array(it.get_tensor(dt["index"])) for j, dt in enumerate(it.get_output_details())}
    if every:
        for t in it.get_tensor_details():
            try:
                out[f"t{t['index']}"] = np.array(it.get_tensor(t["index"]))
            except ValueError:  # a tensor without data (freed, or a delegate's)
                continue
    return out, nhwc


def main(d: str, n: int, every: bool) -> None:
    meta: dict = {}
    nhwc: list[int] = []
    try:
        it = _interpreter(os.path.join(d, "model.tflite"), every)
        for i in range(n):
            with np.load(os.path.join(d, f"in{i}.npz"), allow_pickle=False) as z:
                feeds = [z[f"arr_{j}"] for j in range(len(z.files))]
            out, nhwc = _run_set(it, feeds, every)
            np.savez(os.path.join(d, f"out{i}.npz"), **out)
        meta = {
            "inputs": [dt["name"] for dt in it.get_input_details()],
            "channels_last_inputs": nhwc,
            "outputs": [dt["name"] for dt in it.get_output_details()],
            "tensors": {str(t["index"]): t["name"] for t in it.get_tensor_details()},
            "ops": [{"index": int(o["index"]), "op": o["op_name"],
                     "inputs": [str(int(k)) for k in o["inputs"] if k >= 0],
                     "outputs": [str(int(k)) for k in o["outputs"] if k >= 0]}
                    for o in it._get_ops_details()],
        }
    except Exception as e:  # LiteRT's refusal (load, allocate, invoke): the caller's message
        meta = {"error": f"{type(e).__name__}: {str(e).strip()[:400]}"}
    with open(os.path.join(d, "result.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1")
