"""The child processes of ``benchmarks/bench_tflite.py``, as source text run with ``python -c``.

Each side of the benchmark runs in its own process, and this module imports nothing: the
torch export, the two runtimes and litert-torch (in its own venv) are imported only by the
children. Every child prints one JSON line last.

  * ``EXPORT``: (the test venv's torch) builds the programs (``bench_onnx``'s, the model
    zoo's by name, or the model sweep's by spec, ``timm:convnext_atto``), ``torch.export.save``s them with a dynamic batch, and writes the inputs of two batch sizes with torch eager's outputs (npz).
  * ``PT2X_COLD``: ``python -m pt2x convert X.pt2 --to tflite|onnx -o Y`` with ``import torch``
    made to fail first, so a timed conversion is also a proof that it is torch-free.
  * ``LITERT``: one .tflite in ``ai_edge_litert.interpreter.Interpreter`` (op resolver AUTO: the
    XNNPACK delegate is applied): parity on the example inputs (a dynamic input is resized to
    them first), then after a run at the example batch, ``resize_tensor_input`` to the second
    batch; median latency at each thread count on the example inputs.
  * ``ORT``: one .onnx in ONNX Runtime CPU: the same parity checks and latencies.
  * ``LITERT_TORCH``: runs in litert-torch's venv: ``torch.export.load`` the same .pt2 and
    ``litert_torch.convert(ep.module(), args)``, with the dynamic batch (mode ``dynamic``) or at
    the example shapes (mode ``static``); the parent tries ``dynamic`` first.
"""

from __future__ import annotations

EXPORT = r'''
import json, os, sys, warnings
warnings.filterwarnings("ignore")
root, out, names, max_batch = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4])
second_batch = int(sys.argv[5])
import numpy as np
import torch
torch.set_num_threads(2)
import model_zoo  # (tests/support, on the PYTHONPATH bench_tflite gives) defines torchvision::nms before torchvision (or transformers) imports
from benchmarks.bench_onnx import build as bench_onnx_build

ZOO = {"mobilenet_v3_small": "tv_mobilenet_v3_small", "resnet18": "tv_resnet18", "efficientnet_b0": "tv_efficientnet_b0"}

def program(name):
    """(module, example args, second args): random init, no downloads, every weight re-drawn as
    the model zoo does (tests/support/model_zoo.py: no LayerNorm of exact 1s and 0s and no zero
    bias, which a trained model does not have and a converter could drop). A model zoo name is
    that model."""
    torch.manual_seed(0)
    if ":" in name:  # a sweep spec (tests/support/sweep.py): timm:NAME, tv:NAME or hf:NAME at its small size
        import sweep
        m, shape = sweep.build(name, sweep.DEFAULT_SIZE)
        x = sweep.make_input(shape, 2)
        m = model_zoo.redraw(m.eval(), seed=0, calibrate=x if x.is_floating_point() else None)
        return m, (x,), (sweep.make_input(shape, second_batch),)
    if name in ZOO or name in model_zoo.MODELS:
        zm = model_zoo.MODELS[ZOO.get(name, name)]
        m = model_zoo.redraw(zm.build(), seed=0, calibrate=zm.make_input(8))
        return m, (zm.make_input(2),), (zm.make_input(second_batch),)
    m, args, _ = bench_onnx_build(name)
    m = model_zoo.redraw(m, seed=0, calibrate=args[0] if len(args) == 1 and args[0].is_floating_point() else None)
    g = torch.Generator().manual_seed(1)
    second = tuple(torch.randn((second_batch, *a.shape[1:]), generator=g) if a.is_floating_point()
                   else torch.randint(0, int(a.max()) + 1, (second_batch, *a.shape[1:]), generator=g) for a in args)
    return m, args, second

for name in names:
    row = {"model": name}
    try:
        m, args, second = program(name)
        m.eval()
        batch = torch.export.Dim("batch", min=1, max=max_batch)
        ep = torch.export.export(m, args, dynamic_shapes=tuple({0: batch} for _ in args))
        row["pt2"] = os.path.join(out, name + ".pt2")
        torch.export.save(ep, row["pt2"])
        with torch.no_grad():
            y0, y1 = m(*args), m(*second)
        arrays = {f"x0_{i}": a.numpy() for i, a in enumerate(args)}
        arrays.update({f"x1_{i}": a.numpy() for i, a in enumerate(second)})
        row["inputs"] = os.path.join(out, name + "_inputs.npz")
        np.savez(row["inputs"], y0=y0.numpy(), y1=y1.numpy(), **arrays)
        row["batches"] = [int(args[0].shape[0]), second_batch]
        row["max_batch"] = max_batch
        row["params"] = sum(p.numel() for p in m.parameters())
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    print(json.dumps(row), flush=True)
'''

PT2X_COLD = (
    "import runpy, sys; sys.modules['torch'] = None; "  # any `import torch` now raises ImportError
    "sys.argv = ['pt2x', *sys.argv[1:]]; runpy.run_module('pt2x', run_name='__main__', alter_sys=True)"
)

_INPUTS = r'''
import json, statistics, sys, time
import numpy as np
path, data, runs, threads = sys.argv[1], np.load(sys.argv[2]), int(sys.argv[3]), [int(t) for t in sys.argv[4].split(",")]

def arrays(prefix):
    keys = sorted((k for k in data.files if k.startswith(prefix)), key=lambda k: int(k.split("_")[1]))
    return [data[k] for k in keys]

x0, x1, y0, y1 = arrays("x0_"), arrays("x1_"), data["y0"], data["y1"]

def diff(got, ref):
    got = np.asarray(got)
    if got.shape != ref.shape:
        return {"error": f"output shape {list(got.shape)} != torch's {list(ref.shape)}"}
    d = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
    return {"max_abs_diff": d, "ref_max_abs": float(np.max(np.abs(ref)))}

def attempt(fn):
    try:
        return fn()
    except Exception as e:
        return {"error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}

def median_ms(call, warmup=10):
    for _ in range(warmup):
        call()
    ts = []
    for _ in range(runs):
        t = time.perf_counter(); call(); ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3
'''

LITERT = _INPUTS + r'''
from ai_edge_litert.interpreter import Interpreter

def interpreter(n):
    it = Interpreter(model_path=path, num_threads=n)
    it.allocate_tensors()
    return it

def feed(it, xs):
    """Set the inputs; an input whose shape differs is resized first (a dynamic model's tensors
    start at size 1 where its shape_signature has -1)."""
    ins = it.get_input_details()
    if len(ins) != len(xs):
        raise ValueError(f"the model has {len(ins)} inputs, the program {len(xs)}")
    if any(list(d["shape"]) != list(x.shape) for d, x in zip(ins, xs)):
        for d, x in zip(ins, xs):
            it.resize_tensor_input(d["index"], list(x.shape))
        it.allocate_tensors()
    for d, x in zip(it.get_input_details(), xs):
        it.set_tensor(d["index"], x.astype(d["dtype"]))

def output(it):
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])

def example():
    it = interpreter(threads[-1])
    feed(it, x0)
    return diff(output(it), y0)

def resized():
    it = interpreter(threads[-1])
    feed(it, x0)
    it.invoke()
    feed(it, x1)  # resize_tensor_input to the second batch
    return diff(output(it), y1)

def latency(n):
    it = interpreter(n)
    feed(it, x0)
    res = {"ms": median_ms(it.invoke)}
    # the execution plan after delegation: each XNNPACK partition is one DELEGATE node (a
    # private helper of the interpreter; what it lists is what runs)
    ops = [o["op_name"] for o in it._get_ops_details()]
    res["delegate_partitions"] = ops.count("DELEGATE")
    return res

out = {}
try:
    it = interpreter(1)
    out["inputs"] = [{"dtype": d["dtype"].__name__, "shape_signature": d["shape_signature"].tolist()}
                     for d in it.get_input_details()]
except Exception as e:
    out["load_error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
else:
    out["example"] = attempt(example)
    out["resized"] = attempt(resized)
    out["latency"] = {str(n): attempt(lambda: latency(n)) for n in threads}
print(json.dumps(out))
'''

ORT = _INPUTS + r'''
import onnxruntime as ort

def session(n):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = n
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

def feeds(s, xs):
    return {i.name: x for i, x in zip(s.get_inputs(), xs)}

s = session(threads[-1])
out = {"example": attempt(lambda: diff(s.run(None, feeds(s, x0))[0], y0)),
       "resized": attempt(lambda: diff(s.run(None, feeds(s, x1))[0], y1)), "latency": {}}
for n in threads:
    s = session(n)
    f = feeds(s, x0)
    out["latency"][str(n)] = attempt(lambda: {"ms": median_ms(lambda: s.run(None, f))})
print(json.dumps(out))
'''

LITERT_TORCH = r'''
import json, os, sys, time, warnings, logging
t0 = time.perf_counter()
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
import numpy as np
import torch
import litert_torch
t_import = time.perf_counter() - t0
src, inputs, dst, max_batch, mode = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
data = np.load(inputs)
keys = sorted((k for k in data.files if k.startswith("x0_")), key=lambda k: int(k.split("_")[1]))
args = tuple(torch.from_numpy(data[k]) for k in keys)
module = torch.export.load(src).module()
kw = {}
if mode == "dynamic":
    batch = torch.export.Dim("batch", min=1, max=max_batch)
    kw["dynamic_shapes"] = tuple({0: batch} for _ in args)
out = {"import_s": t_import}
t = time.perf_counter()
try:
    litert_torch.convert(module, args, **kw).export(dst)
    out["convert_s"] = time.perf_counter() - t
except Exception as e:
    out["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
print(json.dumps(out))
'''
