"""Sweep torchvision's classification models through ``to_pte`` and ExecuTorch's runtime.

Not a test. Each model (its weights re-drawn as the model zoo's are, ``model_zoo.redraw``, with
BatchNorm statistics measured on a random batch, so no output is a near-constant) is exported by torch with a fixed input and
saved with ``torch.export.save``; ``to_pte`` converts it where ``import torch`` fails
(``tests/support/torchfree.py``); the .pte runs in ExecuTorch's runtime in a child process and is
compared with torch eager of the loaded program under the parity tests' float32 tolerance
(``tests/support/tolerances.py``, scaled as for a deep model); the output's largest magnitude and
spread are printed beside the difference (a random-init model may answer nearly constant values).
Each model ends as one of:
``match``, ``refused`` (the operators the report names), ``wrong`` (the values differ: a bug)
or ``error`` (anything else: a bug). ``--delegate`` is to_pte's (the delegate's partitions and the
portable kernels left are read back from the file); ``--dynamic`` exports with a dynamic batch
(up to 4) and runs batches 1 and 3.

    python -m scripts.sweep_pte [--models resnet18,mobilenet_v2,...] [--size 112] [--delegate xnnpack|none]
        [--dynamic] [--out bench-out/pte-sweep]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

from scripts.environment import child_env, ensure_support

MODELS = ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_0",
          "shufflenet_v2_x0_5", "mnasnet0_5", "regnet_y_400mf", "googlenet", "densenet121", "convnext_tiny",
          "alexnet", "vit_b_16")

RUN = textwrap.dedent("""
    import sys, json
    import numpy as np
    import torch
    from executorch.runtime import Runtime
    from tolerances import MODEL_SCALE, tolerance
    ep = torch.export.load(sys.argv[1])
    torch.manual_seed(1)
    with open(sys.argv[2], "rb") as f:
        data = f.read()
    program = Runtime.get().load_program(data)
    method = program.load_method("forward")
    rtol, atol = tolerance("float32")
    rtol, atol = rtol * MODEL_SCALE["float32"], atol * MODEL_SCALE["float32"]
    ok, diff, peak, std = True, 0.0, 0.0, 0.0
    for shape in sys.argv[3].split(","):
        x = torch.randn(*[int(d) for d in shape.split("x")])
        got = method.execute([x])
        with torch.no_grad():
            want = ep.module()(x)
        want = want if isinstance(want, (tuple, list)) else (want,)
        ok = ok and all(np.allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol) for g, w in zip(got, want))
        diff = max([diff] + [float((g - w).abs().max()) for g, w in zip(got, want)])
        peak = max([peak] + [float(w.abs().max()) for w in want])
        std = max([std] + [float(w.std()) for w in want])
    print(json.dumps({"ok": bool(ok), "max_abs_diff": diff, "max_abs_want": peak, "std_want": std}))
""")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--size", type=int, default=112, help="input height and width (vit_b_16 always 224)")
    ap.add_argument("--delegate", choices=("xnnpack", "none"), default=None, help="to_pte's delegate (default: its default)")
    ap.add_argument("--dynamic", action="store_true", help="export with a dynamic batch (<= 4), run batches 1 and 3")
    ap.add_argument("--out", default=os.path.join("bench-out", "pte-sweep"))
    args = ap.parse_args(argv)
    ensure_support("scripts.sweep_pte")  # tests/support (torchfree, tolerances) on PYTHONPATH
    from torchvision_ops import register_torchvision_ops

    register_torchvision_ops()
    import torch
    import torchvision

    from model_zoo import redraw
    from pt2x.converters.errors import UnsupportedOpsError
    from pt2x.converters.pte.reader import read_pte
    from torchfree import convert_torch_free

    os.makedirs(args.out, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        torch.manual_seed(0)
        m = getattr(torchvision.models, name)(weights=None).eval()
        size = 224 if name.startswith("vit") else args.size
        shape = (1, 3, size, size)
        runs = [(b, 3, size, size) for b in ((1, 3) if args.dynamic else (1,))]
        dynamic = ({0: torch.export.Dim("batch", max=4)},) if args.dynamic else None
        kwargs = {"delegate": args.delegate} if args.delegate else {}
        with torch.no_grad():  # weights as the model zoo draws them: no degenerate, near-constant output
            redraw(m, calibrate=torch.randn(4, *shape[1:]))
        src = os.path.join(args.out, f"{name}.pt2")
        dst = os.path.join(args.out, f"{name}.pte")
        row = {"model": name}
        try:
            example = torch.randn(2, *shape[1:]) if args.dynamic else torch.randn(*shape)
            torch.export.save(torch.export.export(m, (example,), dynamic_shapes=dynamic), src)
            data = convert_torch_free("to_pte", src, **kwargs)
            with open(dst, "wb") as f:
                f.write(data)
            plan = read_pte(data)["execution_plans"][0]
            row.update(partitions=plan["delegate_calls"], portable_kernels=sum(plan["operators"].values()))
            r = subprocess.run([sys.executable, "-c", RUN, src, dst, ",".join("x".join(map(str, s)) for s in runs)],
                               capture_output=True, text=True, env=child_env())
            if r.returncode != 0:
                row.update(result="error", detail=f"runtime exit {r.returncode}: {r.stderr[-300:]}")
            else:
                res = json.loads(r.stdout.strip().splitlines()[-1])
                row.update(result="match" if res["ok"] else "wrong", max_abs_diff=res["max_abs_diff"],
                           max_abs_output=res["max_abs_want"], output_std=res["std_want"])
        except UnsupportedOpsError as e:
            row.update(result="refused", ops=[p.target for p in e.ops])
        except Exception as e:  # noqa: BLE001  (a sweep records every failure)
            row.update(result="error", detail=f"{type(e).__name__}: {str(e)[:300]}")
        rows.append(row)
        print(json.dumps(row), flush=True)
    counts = {k: sum(r["result"] == k for r in rows) for k in ("match", "refused", "wrong", "error")}
    print(json.dumps(counts))
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 0 if counts["wrong"] == counts["error"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
