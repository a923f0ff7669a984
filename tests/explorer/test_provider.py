"""The node-data provider (``Pt2xVerifyProvider``) as Model Explorer's server runs it: through its
extension manager, where ``import torch`` fails. Given a converted file with a planted fault it
returns the error-over-tolerance, max abs and max rel node data for the graph shown, the faulted
node marked first; a path that is not there, or no path, is an error message, not a crash."""

from __future__ import annotations

import json

import onnx
import torch

import planted_faults as pf
from pt2x.explorer.overlay import FIRST
from torchfree import run_torch_free

_RUN = r"""
import json, sys
import model_explorer.extension_manager as em
manager = em.ExtensionManager(["pt2x.explorer"])
manager.load_extensions()
pt2, bad = sys.argv[1:]
editors = manager.run_cmd({"extensionId": "pt2x_verify", "cmdId": "get_config_editors"})
runs = {}
for label, converted in (("fault", bad), ("missing", bad + ".nope"), ("empty", " ")):
    runs[label] = manager.run_cmd({"extensionId": "pt2x_verify", "cmdId": "run", "modelPath": pt2, "graphId": "graph",
                                   "configValues": {"converted": converted, "reference": "auto"}})
print(json.dumps({"editors": editors, "runs": runs}))
"""


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return self.conv2(torch.relu(self.conv1(x))).mean(dim=(2, 3))


def test_provider_colors_a_planted_fault_torch_free(tmp_path):
    from pt2x.converters import to_onnx

    pt2, good, bad = (str(tmp_path / n) for n in ("net.pt2", "net.onnx", "bad.onnx"))
    torch.manual_seed(0)
    torch.export.save(torch.export.export(Net().eval(), (torch.randn(1, 3, 8, 8),)), pt2)
    to_onnx(pt2, good)
    onnx.save(pf.scale_onnx_weight(onnx.load(good), "conv2.weight", 2.0), bad)
    r = run_torch_free(_RUN, pt2, bad, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    editors = out["editors"]["configEditors"]
    assert [e["id"] for e in editors] == ["converted", "reference"] and editors[0]["required"]
    fault = out["runs"]["fault"]
    assert fault["error"] == "" and len(fault["result"]) == 3
    max_abs, max_rel, ratio = fault["result"]  # the last is the one Model Explorer shows
    assert ratio["name"] == "error / tolerance (onnx vs onnx ReferenceEvaluator on pt2x's ONNX)"
    assert ratio["results"]["conv2d_1"]["bgColor"] == FIRST[0] and ratio["results"]["conv2d_1"]["value"] > 1
    assert ratio["results"]["relu"]["value"] <= 0.1 and ratio["thresholds"]
    assert max_abs["results"]["conv2d_1"]["value"] > 0.01 and set(max_rel["results"]) == set(ratio["results"])
    assert "cannot read" in out["runs"]["missing"]["error"] and out["runs"]["missing"]["result"] is None
    assert "give the path" in out["runs"]["empty"]["error"]
