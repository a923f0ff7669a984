"""onnx2tf as a side of the TFLite benchmark (``bench_tflite.py --onnx2tf``): the ONNX-to-TFLite
converter many users reach for, run on pt2x's own ONNX of the same program.

onnx2tf needs TensorFlow, so it lives in a venv of its own, made when missing with
``onnx2tf==1.29.24`` (the newest release; it pins its whole stack: tensorflow 2.19.0, onnx 1.19.1,
onnxruntime 1.23.0, ai-edge-litert 2.1.0). Each conversion is one cold process:

    python -m onnx2tf -i pt2x.onnx -o DIR -ois <input>:<static shape> ... -k <every input> -n

``-ois`` gives every input its static shape at the benchmark's example batch (onnx2tf writes static shapes; its ``-b 1``
leaves the symbolic batch in the shapes it propagates and then mistakes a residual ADD's layout
on pt2x's resnet18), and ``-k`` keeps every 3- to 5-D input's layout as the ONNX file has it (NCHW images
stay NCHW, as pt2x's and litert-torch's files take them), so one input file feeds all the sides.
The float32 file is the one measured.

For a model of image inputs onnx2tf fetches a file of sample images from the network to check
its conversion; there is no network here, so the process runs in a folder that already holds a
file of that name, filled with seeded uniform [0, 1) data (it is only fed to the model).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time

ONNX2TF = "onnx2tf==1.29.24"
SAMPLE_IMAGES = "calibration_image_sample_data_20x128x128x3_float32.npy"  # the name onnx2tf looks for in its cwd


def ensure_onnx2tf_venv(venv: str) -> str:
    """The venv's python, after making the venv where it is missing."""
    python = os.path.join(venv, "bin", "python")
    check = [python, "-c", "import onnx2tf, tensorflow"]
    if os.path.exists(python) and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    for step in ([sys.executable, "-m", "venv", venv], [python, "-m", "pip", "install", "-q", ONNX2TF]):
        print("$", " ".join(step), flush=True)
        subprocess.run(step, check=True, timeout=3600)
    subprocess.run(check, check=True)
    return python


def _write_sample_images(path: str) -> None:
    import numpy as np

    np.save(path, np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32))


def static_inputs(onnx_path: str, batch: int = 1) -> dict[str, list[int]]:
    """Every graph input's shape with its leading dynamic dim set to ``batch``; ValueError for any
    other dim not static."""
    import onnx

    model = onnx.load(onnx_path, load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    shapes = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in value.type.tensor_type.shape.dim]
        if dims and dims[0] < 0:
            dims[0] = batch
        if any(d < 0 for d in dims):
            raise ValueError(f"input {value.name!r} has a dynamic dim past the batch: {dims}")
        shapes[value.name] = dims
    return shapes


def onnx2tf_convert(python: str, onnx_path: str, dst: str, batch: int = 1, timeout: float = 1800) -> dict:
    """Convert ``onnx_path`` with onnx2tf into ``dst``, the dynamic batch fixed at ``batch``: ``cold_s`` (wall seconds of the one cold
    process) and ``bytes``, or ``error`` with the tail of what it printed."""
    work = os.path.abspath(dst + ".onnx2tf")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    _write_sample_images(os.path.join(work, SAMPLE_IMAGES))
    try:
        shapes = static_inputs(onnx_path, batch)
    except ValueError as e:
        return {"error": f"onnx2tf not run: {e}"}
    argv = [python, "-m", "onnx2tf", "-i", os.path.abspath(onnx_path), "-o", work, "-n",
            "-ois", *(f"{name}:{','.join(map(str, dims))}" for name, dims in shapes.items())]
    channels_first = [name for name, dims in shapes.items() if 3 <= len(dims) <= 5]  # what -k accepts
    if channels_first:
        argv += ["-k", *channels_first]
    t = time.perf_counter()
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=work)
    except subprocess.TimeoutExpired:
        return {"error": f"onnx2tf timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - t
    files = sorted(glob.glob(os.path.join(work, "*_float32.tflite")))
    if r.returncode or not files:
        tail = " ".join((r.stderr or r.stdout).strip().splitlines()[-3:])[-400:]
        return {"error": f"onnx2tf exited {r.returncode}: {tail}"}
    shutil.copyfile(files[0], dst)
    shutil.rmtree(work, ignore_errors=True)
    return {"cold_s": wall, "bytes": os.path.getsize(dst), "dynamic": False}
