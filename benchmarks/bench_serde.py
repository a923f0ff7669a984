"""Benchmark: pt2x save/load vs torch.export.save/load, in process (not a test).

A 12-layer ``nn.TransformerEncoder`` (d_model 256, nhead 8, ff 1024, batch_first,
dynamic batch), as exported and after ``run_decompositions()``. Each operation runs
``--repeat`` times into an in-memory buffer; medians and torch/pt2x ratios are printed.
The load half runs when ``pt2x.serde.torch.deserialize.load_exported_program`` exists.

    python -m benchmarks.bench_serde [--repeat 7]
"""

from __future__ import annotations

import argparse
import io
import platform
import statistics
import time
import warnings


def _median_time(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _model():
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 12, enable_nested_tensor=False).eval()
    x = torch.randn(4, 16, 256)
    batch = torch.export.Dim("batch", min=1, max=64)
    return torch.export.export(model, (x,), dynamic_shapes=({0: batch},))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")

    import torch

    from pt2x.serde.torch import api as bridge

    try:
        from pt2x.serde.torch.deserialize import load_exported_program as pt2x_load
    except ImportError:
        pt2x_load = None

    print(f"python {platform.python_version()} torch {torch.__version__} {platform.machine()} "
          f"threads {torch.get_num_threads()}")
    ep = _model()
    programs = {"exported": ep, "decomposed": ep.run_decompositions()}
    for label, prog in programs.items():
        def torch_save(prog=prog):
            buf = io.BytesIO()
            torch.export.save(prog, buf)
            return buf.getvalue()

        def pt2x_save(prog=prog):
            buf = io.BytesIO()
            bridge.save(prog, buf)
            return buf.getvalue()

        size = len(pt2x_save())
        t_torch, t_pt2x = _median_time(torch_save, args.repeat), _median_time(pt2x_save, args.repeat)
        print(f"{label:10s} save  torch {t_torch * 1e3:8.1f} ms  pt2x {t_pt2x * 1e3:8.1f} ms  "
              f"ratio {t_torch / t_pt2x:5.2f}x  ({size / 1e6:.1f} MB, {len(prog.graph.nodes)} nodes)")
        if pt2x_load is not None:
            blob = pt2x_save()
            t_tl = _median_time(lambda: torch.export.load(io.BytesIO(blob)), args.repeat)
            t_pl = _median_time(lambda: pt2x_load(io.BytesIO(blob)), args.repeat)
            print(f"{label:10s} load  torch {t_tl * 1e3:8.1f} ms  pt2x {t_pl * 1e3:8.1f} ms  ratio {t_tl / t_pl:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
