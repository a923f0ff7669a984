"""``Subgraph`` is the only way to edit a TFLite subgraph's operators, and its producers/readers
index (``Subgraph.uses``) is valid after every edit: the passes read it instead of building maps
of their own (``model.py``)."""

from __future__ import annotations

import os
import re

import pytest
import torch

from pt2x.converters import to_tflite
from pt2x.converters.tflite import pipeline
from pt2x.converters.tflite.core.model import Op, Subgraph, Tensor, TensorType, Uses

TFLITE = os.path.join(os.path.dirname(os.path.abspath(pipeline.__file__)))

# edits of the op list or of an op's operands that bypass Subgraph's methods, and maps of
# producers/readers built by hand (what ``Subgraph.uses`` holds)
FORBIDDEN = {
    "the op list edited in place": re.compile(r"\.ops\.(append|insert|remove|extend|pop|clear|sort)\("),
    "the op list replaced": re.compile(r"\.ops(\[[^\]]*\])?\s*=(?!=)"),
    "an op's operands replaced": re.compile(r"(?<![\w.])(?!sub\b)(?!self\b)(?!em\.sub\b)(?!child\.sub\b)[\w.]+\.(inputs|outputs)"
                                            r"(\[[^\]]*\])?\s*=(?!=)"),
    "a producer map over the ops": re.compile(r"\{\s*\w+\s*:\s*\w+\s+for\s+\w+\s+in\s+[\w.]*\bops\b"),
    "a reader count over the ops": re.compile(r"\breader_counts\b|\bindex_uses\b"),
    # the ONNX side: graph_tools.DefUse is the one index of an ONNX graph's producers and readers
    "a producer map over an ONNX graph": re.compile(r"\{\s*\w+\s*:\s*\w+\s+for\s+\w+\s+in\s+[\w.]*\bnode\b"),
    "a reader map over an ONNX graph": re.compile(r"\breaders\w*\.setdefault\("),
}


def _sources():
    """(path under converters/tflite/, lines) of every module but the model and flatc's output."""
    for folder, _, files in sorted(os.walk(TFLITE)):
        for name in sorted(files):
            rel = os.path.relpath(os.path.join(folder, name), TFLITE)
            if name.endswith(".py") and rel not in (os.path.join("core", "model.py"), "schema_generated.py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    yield rel, f.read().splitlines()


def test_ops_are_edited_only_through_the_subgraph():
    found = [f"{name}:{i}: {what}: {line.strip()}" for name, lines in _sources() for i, line in enumerate(lines, 1)
             for what, pattern in FORBIDDEN.items() if pattern.search(line.split("#")[0])]
    assert not found, "\n".join(found)


def test_the_patterns_catch_what_they_name():
    assert FORBIDDEN["the op list edited in place"].search("sub.ops.remove(op)")
    assert FORBIDDEN["the op list replaced"].search("sub.ops = kept")
    assert FORBIDDEN["an op's operands replaced"].search("op.inputs = [a, b]")
    assert FORBIDDEN["an op's operands replaced"].search("mm.inputs[1] = b")
    assert not FORBIDDEN["an op's operands replaced"].search("sub.outputs = [out]")
    assert FORBIDDEN["a producer map over the ops"].search("producer = {o: op for op in sub.ops for o in op.outputs}")
    assert FORBIDDEN["a producer map over an ONNX graph"].search("self.producer = {o: n for n in g.node for o in n.output}")
    assert FORBIDDEN["a reader map over an ONNX graph"].search("self.readers.setdefault(i, []).append(n)")


def _index_of(ops: list[Op]) -> tuple[dict, dict]:
    """The producers (by identity) and the readers (as sorted identities) of ``ops``."""
    u = Uses(ops)
    return ({t: id(op) for t, op in u.producer.items()},
            {t: sorted(map(id, rs)) for t, rs in u.readers.items() if rs})


def _checked_passes(seen: list):
    """``SUBGRAPH_PASSES``, each followed by a comparison of the kept index with a fresh one."""
    def wrap(p):
        def run(sub, main, nhwc_io):
            p.run(sub, main, nhwc_io)
            kept = sub.uses
            assert ({t: id(op) for t, op in kept.producer.items()},
                    {t: sorted(map(id, rs)) for t, rs in kept.readers.items() if rs}) == _index_of(sub.ops), p.name
            seen.append(p.name)
        return pipeline.Pass(p.name, run, p.why)
    return tuple(wrap(p) for p in pipeline.SUBGRAPH_PASSES)


class _Net(torch.nn.Module):
    """A conv with a bias ADD and a ReLU (fold biases, fuse activations), a scale (fold affine),
    k transposed before a matmul (adj_y), a keep_dims mean and a flatten (reduce_squeeze)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.q, self.k = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.relu((self.conv(x) + 0.5) * 2.0)  # [N, 8, H, W]
        t = h.flatten(2).transpose(1, 2)  # [N, HW, 8]
        att = torch.softmax(self.q(t) @ self.k(t).transpose(-1, -2), dim=-1)
        y = (att @ t).mean(dim=1, keepdim=True)
        return y.reshape(y.shape[0], -1)


@pytest.mark.parametrize("kw", [{}, {"nhwc_io": True}, {"weights": "int8"}], ids=["plain", "nhwc_io", "int8_weights"])
def test_the_index_is_valid_after_every_pass(tmp_path, monkeypatch, kw):
    torch.manual_seed(0)
    path = str(tmp_path / "net.pt2")
    torch.export.save(torch.export.export(_Net().eval(), (torch.randn(2, 3, 6, 6),)), path)
    seen: list[str] = []
    monkeypatch.setattr(pipeline, "SUBGRAPH_PASSES", _checked_passes(seen))
    to_tflite(path, **kw)
    assert seen == [p.name for p in pipeline.SUBGRAPH_PASSES]


def test_every_edit_keeps_the_index():
    sub = Subgraph("main")
    a, b, c, d = (sub.add(Tensor(n, TensorType.FLOAT32, [2])) for n in "abcd")
    first = sub.append_op(Op("ADD", [a, b], [c]))
    assert sub.uses.producer[c] is first  # built here, then kept
    second = Op("MUL", [c, c], [d])
    sub.insert_op(1, second)
    sub.rewire(second, inputs=[c, a])
    third = Op("NEG", [d], [b])
    sub.set_ops([third, first, second])
    sub.remove_op(first)
    assert _index_of(sub.ops) == ({t: id(op) for t, op in sub.uses.producer.items()},
                                  {t: sorted(map(id, rs)) for t, rs in sub.uses.readers.items() if rs})
    assert sub.uses.count(c) == 1 and sub.uses.count(a) == 1 and c not in sub.uses.producer
