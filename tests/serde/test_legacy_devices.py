"""The older layouts' weight pickles carry each storage's device as a location string that
``torch.load`` parses with ``torch.device``: a device type torch does not know, or an index
outside its ``DeviceIndex`` (int8: torch wraps 300 to 44), is refused naming the field
(``target-device``), and nothing is written; a real device is written as torch writes it."""

from __future__ import annotations

import io
import json
import os
import zipfile

import pytest

from pt2x import serde
from pt2x.serde.codec.devices import DEVICE_TYPES, device_problem
from pt2x.serde.compat import plan as compat_plan
from pt2x.tools.cli import main
from paths import PT2_FIXTURES

SRC = os.path.join(PT2_FIXTURES, "torch-2.14.1", "mlp_dynamic.pt2")
CONFIG = "mlp_dynamic/data/weights/model_weights_config.json"


def _with_device(tmp_path, device: dict) -> str:
    dst = tmp_path / "edited.pt2"
    with zipfile.ZipFile(SRC) as src, zipfile.ZipFile(dst, "w") as out:
        for info in src.infolist():
            body = src.read(info)
            if info.filename == CONFIG:
                doc = json.loads(body)
                doc["config"]["fc1.weight"]["tensor_meta"]["device"] = device
                body = json.dumps(doc).encode()
            out.writestr(info.filename, body)
    return str(dst)


@pytest.mark.parametrize("device", [
    {"type": "banana", "index": None},
    {"type": "cuda:0", "index": None},
    {"type": "CPU", "index": None},
    {"type": "cuda", "index": 300},
    {"type": "cuda", "index": 128},
    {"type": "cpu", "index": -1},
])
@pytest.mark.parametrize("target", ["8.8", "8.2"])
def test_bad_device_is_refused_with_its_field(tmp_path, capsys, device, target):
    path = _with_device(tmp_path, device)
    with serde.load(path) as a:
        plan = compat_plan.plan_for_target(a, target)
    (blocker,) = [f for f in plan.blockers if f.code == "target-device"]
    assert blocker.member.endswith("model_weights_config.json")
    assert blocker.path == "config['fc1.weight'].tensor_meta.device"
    out = tmp_path / "out.pt2"
    assert main(["convert", path, "--to", "pt2", "--target-schema", target, "-o", str(out)]) == 1
    assert not out.exists()
    assert "target-device" in capsys.readouterr().err


def test_real_device_is_written_as_torch_writes_it(tmp_path):
    path = _with_device(tmp_path, {"type": "cuda", "index": 1})
    with serde.load(path) as a:
        plan = compat_plan.plan_for_target(a, "8.8")
    assert plan.writable, [str(f) for f in plan.blockers]
    (weights,) = [bytes(b) for n, b in plan.members if n.endswith("data/weights/model.pt")]
    torch = pytest.importorskip("torch")
    locations = []
    state = torch.load(io.BytesIO(weights), weights_only=True,
                       map_location=lambda storage, loc: locations.append(loc) or storage)
    assert "fc1.weight" in state and "cuda:1" in locations and "cpu" in locations


def test_device_table_is_torchs():
    torch = pytest.importorskip("torch")
    for name in DEVICE_TYPES:
        assert device_problem(name, None) is None
        if name != "mkldnn":  # deprecated: torch warns, still parses
            torch.device(name)
    for bad in ("banana", "metal", "cuda:0"):
        assert device_problem(bad, None) is not None
        with pytest.raises(RuntimeError):
            torch.device(bad if ":" not in bad else "cuda:00")
    assert torch.device("cuda", 127).index == 127 and device_problem("cuda", 127) is None
    assert torch.device("cuda", 128).index != 128 and device_problem("cuda", 128) is not None
