"""Runs inside an old torch's venv (torch 2.5.1, 2.6.0, 2.8.0...): load the files pt2x wrote for it and check them.

Used by ``scripts/check_old_torch.py``; standalone (torch and numpy only, no pt2x, which the
old venv does not have). For each entry of the manifest (JSON: ``[{"case", "file", "npz",
"inputs"}]``, ``inputs`` a list of input sets, each a tree with tensors named by npz keys;
optional ``rtol``/``atol``): ``torch.export.load`` the file, run one module of it on every input
set in order and compare with the outputs the exporting torch computed (``out<k>_0``... for set
``k``; bfloat16 compared as float32), then
``torch.export.save`` the loaded program and load and run that too. Prints one JSON line per
entry: ``{"case", "load", "outputs", "resave", "max_abs_diff", "error"}``.

    <old venv>/bin/python tests/support/old_torch_worker.py MANIFEST.json
"""

from __future__ import annotations

import io
import json
import sys
import traceback

import numpy as np
import torch

RTOL, ATOL = 1e-5, 1e-6  # another torch build's CPU kernels may round differently


@torch.library.custom_op("pt2x_test::scaled_add", mutates_args=())
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:  # the zoo's custom_op case
    return x + alpha * y


@scaled_add.register_fake
def _(x, y, alpha):
    return torch.empty_like(x)


def decode(node, arrays):
    if "tensor" in node:
        return torch.from_numpy(np.array(arrays[node["tensor"]])).to(getattr(torch, node["dtype"]))
    if "tuple" in node:
        return tuple(decode(x, arrays) for x in node["tuple"])
    if "list" in node:
        return [decode(x, arrays) for x in node["list"]]
    if "dict" in node:
        return {k: decode(v, arrays) for k, v in node["dict"]}
    return node["value"]


def leaves(x):
    if isinstance(x, torch.Tensor):
        yield x.detach().float().numpy() if x.dtype == torch.bfloat16 else x.detach().numpy()
    elif isinstance(x, (tuple, list)):
        for v in x:
            yield from leaves(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from leaves(v)
    elif x is not None:
        yield np.asarray(x)


def run_set(module, tree, k: int, arrays, rtol: float, atol: float) -> float:
    """Run ``module`` on input set ``k``; the largest difference from its expected outputs (raises if not close)."""
    args, kwargs = decode(tree, arrays)
    got = list(leaves(module(*args, **kwargs)))
    want = [arrays[f"out{k}_{i}"] for i in range(sum(1 for key in arrays.files if key.startswith(f"out{k}_")))]
    if len(got) != len(want):
        raise AssertionError(f"input set {k}: {len(got)} outputs, expected {len(want)}")
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"input set {k}, output {i}")
        if g.size:
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))))
    return worst


def run(ep, entry, arrays) -> float:
    """Run one module of ``ep`` on every input set, in order (state a program mutates carries from
    one set to the next, as where the outputs were computed); the largest difference."""
    module = ep.module()
    rtol, atol = entry.get("rtol", RTOL), entry.get("atol", ATOL)
    return max(run_set(module, tree, k, arrays, rtol, atol) for k, tree in enumerate(entry["inputs"]))


def check(entry) -> dict:
    result = {"case": entry["case"], "load": False, "outputs": False, "resave": False, "max_abs_diff": None, "error": None}
    step = "load"
    try:
        arrays = np.load(entry["npz"])
        ep = torch.export.load(entry["file"])
        result["load"] = True
        buf = io.BytesIO()
        torch.export.save(ep, buf)  # before running: a program that mutates buffers advances them when run
        step = "outputs"
        result["max_abs_diff"] = run(ep, entry, arrays)
        result["outputs"] = True
        step = "resave"
        buf.seek(0)
        run(torch.export.load(buf), entry, arrays)
        result["resave"] = True
    except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
        last = traceback.extract_tb(e.__traceback__)[-1]
        result["error"] = f"{step}: {type(e).__name__}: {str(e)[:300]} ({last.name}:{last.lineno})"
    return result


def main(manifest: str) -> int:
    with open(manifest, encoding="utf-8") as f:
        entries = json.load(f)
    for entry in entries:
        print(json.dumps(check(entry)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
