"""The README's first set-up command on the base install (numpy and ml_dtypes, no extra): ``pt2x
inspect`` and ``pt2x validate`` of the shipped example, in a process where every extra's package
fails to import, as after ``pip install -e .`` alone."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "mlp_dynamic.pt2")
# what the extras install (pyproject.toml's optional-dependencies), each made unimportable
EXTRAS = ("torch", "flatbuffers", "onnx", "onnxruntime", "onnx_ir", "ai_edge_litert", "executorch", "ray",
          "model_explorer", "graphviz")

_CODE = ("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in EXTRAS)
         + "from pt2x.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n")


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CODE, *argv], capture_output=True, text=True, timeout=120)


def test_inspect_and_validate_the_example_without_extras():
    r = _cli("inspect", EXAMPLE)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "mlp_dynamic.pt2" in r.stdout
    r = _cli("validate", EXAMPLE)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
