"""``pt2x inspect FILE --graph OUT.svg|png|dot [--node-data ND.json]``: the program drawn with
Graphviz, collapsed by module to at most ``MAX_BOXES`` boxes, colored as ``verify --node-data``
colors Model Explorer; torch-free. Without Graphviz's ``dot`` an SVG or PNG is refused in one line
(the DOT source still written)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import onnx
import pytest
import torch

import planted_faults as pf
from pt2x.explorer.overlay import FIRST
from pt2x.explorer.picture import MAX_BOXES
from pt2x.tools.cli import main
from torchfree import run_cli_torch_free

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed (Debian: apt-get install graphviz)")


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class Deep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Linear(4, 8)
        self.blocks = torch.nn.Sequential(*[Block() for _ in range(40)])

    def forward(self, x):
        return self.blocks(self.stem(x))


@pytest.fixture(scope="module")
def deep(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("picture") / "deep.pt2")
    torch.export.save(torch.export.export(Deep().eval(), (torch.randn(2, 4),)), path)
    return path


def _boxes(dot: str) -> list[str]:
    return re.findall(r'^  ("(?:[^"\\]|\\.)*") \[label=', dot, re.M)


def test_collapsed_by_module_to_a_readable_size(deep, tmp_path):
    out = str(tmp_path / "deep.dot")
    r = run_cli_torch_free("inspect", deep, "--graph", out)
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        dot = f.read()
    boxes = _boxes(dot)
    assert len(boxes) <= MAX_BOXES < 40 * 4  # 164 operators, folded
    assert '"module:blocks/0" [label="blocks.0\\nBlock\\n4 ops\\n4 weights", shape=box3d]' in dot
    assert '"linear" [label="linear\\naten.linear\\n2 weights"]' in dot  # stem: one node, above the folded level
    assert '"module:blocks/0" -> "module:blocks/1";' in dot


@needs_dot
def test_svg_and_png_with_node_data(tmp_path, capsys):
    from pt2x.converters import to_onnx

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x):
            return self.conv2(torch.relu(self.conv1(x))).mean(dim=(2, 3))

    pt2, good, bad, nd = (str(tmp_path / n) for n in ("net.pt2", "net.onnx", "bad.onnx", "nd.json"))
    torch.manual_seed(0)
    torch.export.save(torch.export.export(Net().eval(), (torch.randn(1, 3, 8, 8),)), pt2)
    to_onnx(pt2, good)
    onnx.save(pf.scale_onnx_weight(onnx.load(good), "conv2.weight", 2.0), bad)
    assert main(["verify", pt2, bad, "--locate", "--node-data", nd]) == 1
    capsys.readouterr()
    svg, png = str(tmp_path / "net.svg"), str(tmp_path / "net.png")
    for out in (svg, png):
        r = run_cli_torch_free("inspect", pt2, "--graph", out, "--node-data", nd)
        assert r.returncode == 0 and f"wrote {out}" in r.stdout, r.stderr
    with open(svg) as f:
        text = f.read()
    assert f'fill="{FIRST[0]}"' in text and "first divergence" in text and "conv2d_1" in text
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_without_dot_svg_is_refused_and_dot_source_written(deep, tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no dot on it
    code = "import sys\nsys.modules['torch'] = None\nfrom pt2x.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    svg = str(tmp_path / "deep.svg")
    r = subprocess.run([sys.executable, "-c", code, "inspect", deep, "--graph", svg], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 2 and "needs Graphviz's dot" in r.stderr and "Traceback" not in r.stderr
    assert not os.path.exists(svg)
    r = subprocess.run([sys.executable, "-c", code, "inspect", deep, "--graph", str(tmp_path / "d.dot")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and os.path.getsize(tmp_path / "d.dot") > 0


def test_bad_options_are_one_line(deep, tmp_path, capsys):
    assert main(["inspect", deep, "--graph", str(tmp_path / "x.gif")]) == 2
    assert "the picture is .svg, .png or .dot" in capsys.readouterr().err
    assert main(["inspect", deep, "--node-data", deep]) == 2
    assert "give --graph" in capsys.readouterr().err
    bad = tmp_path / "nd.json"
    bad.write_text("[1, 2]")
    assert main(["inspect", deep, "--graph", str(tmp_path / "x.dot"), "--node-data", str(bad)]) == 2
    assert "node data is a JSON object" in capsys.readouterr().err
