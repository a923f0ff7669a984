"""``torch.cond`` in the .pte target (converters/pte/control_flow.py): programs torch exports at
test time, converted where ``import torch`` fails, run in ExecuTorch's runtime with inputs that take
each branch (each input set twice, in turn, on one loaded method: a ``MoveCall`` of one run must
not leak into the next), compared with torch eager. ``while_loop`` is refused, naming the node."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402

import pte_cond_zoo  # noqa: E402
from archive_edits import patched  # noqa: E402
from torchfree import convert_torch_free  # noqa: E402
from tolerances import assert_close  # noqa: E402

from pt2x.converters.errors import UnsupportedOpsError  # noqa: E402
from pt2x.converters.pte.reader import read_pte  # noqa: E402


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name -> (module, its input sets, its saved .pt2); exported once for the module."""
    root = tmp_path_factory.mktemp("cond")
    out = {}
    for name in pte_cond_zoo.PROGRAMS:
        path = str(root / f"{name}.pt2")
        out[name] = (*pte_cond_zoo.export(name, path), path)
    return out


def _check(data: bytes, cases: list[tuple[tuple, tuple]], what: str) -> None:
    for inputs, want, got in pte_cond_zoo.run_each_twice(data, cases):
        assert len(got) == len(want), f"{what}: {len(got)} outputs, want {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert g.shape == w.shape, f"{what} output {i}: shape {tuple(g.shape)}, want {tuple(w.shape)}"
            assert_close(g.numpy(), w.detach().numpy(), "float32", what=f"{what} output {i} {tuple(inputs[-1].shape)}")


@pytest.mark.parametrize("name", sorted(pte_cond_zoo.PROGRAMS))
def test_matches_torch_eager_on_both_branches(saved, name):
    m, inputs, path = saved[name]
    data = convert_torch_free("to_pte", path)
    _check(data, [(i, pte_cond_zoo.eager(m, i)) for i in inputs], name)


def test_layout(saved):
    """Per cond: a JumpFalse to the false branch, one past it; a Move per output per branch."""
    for name, conds, outputs in (("two_outputs", 1, 2), ("nested", 2, 1)):
        plan = read_pte(convert_torch_free("to_pte", saved[name][2]))["execution_plans"][0]
        kinds = plan["instructions"]
        assert kinds["JumpFalseCall"] == 2 * conds and kinds["MoveCall"] == 2 * conds * outputs, (name, kinds)


def _branch_outputs(doc, branch: str, outputs: list[str]) -> None:
    """Rewrite the outputs of subgraph ``branch`` of the program's cond to the values ``outputs``."""
    for node in doc["graph_module"]["graph"]["nodes"]:
        for a in node["inputs"]:
            g = a["arg"].get("as_graph")
            if g is not None and g["name"] == branch:
                g["graph"]["outputs"] = [{"as_tensor": {"name": n}} for n in outputs]


class Passing(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.b = torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: (x.sin(), x.cos()), lambda x: (x * self.b, x + self.b), (x,))


def test_branch_returning_an_operand_or_a_weight(tmp_path):
    """torch 2.13 refuses to export a branch that returns its input or a weight ("aliasing"); a
    program that has one (here: edited into a saved one) gets a copy in the branch, so the two
    branches' values can share the output's storage: the true branch returns its input twice, the
    false one the weight and a product."""
    torch.manual_seed(0)
    m = Passing().eval()
    src = str(tmp_path / "passing.pt2")
    torch.export.save(torch.export.export(m, (torch.randn(4),)), src)

    def edit(doc):
        _branch_outputs(doc, "true_graph_0", ["x", "x"])
        _branch_outputs(doc, "false_graph_0", ["p_b", "mul"])

    data = convert_torch_free("to_pte", patched(tmp_path, src, edit))
    pos, neg = torch.rand(4), -torch.rand(4)
    with torch.no_grad():
        _check(data, [((pos,), (pos, pos)), ((neg,), (m.b, neg * m.b))], "passing")
    assert read_pte(data)["execution_plans"][0]["operators"]["aten::clone.out"] == 3


class WhileLoop(torch.nn.Module):
    def forward(self, i, x):
        return torch.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2), (i, x))


def test_while_loop_is_refused_naming_the_node(tmp_path):
    path = str(tmp_path / "while.pt2")
    torch.export.save(torch.export.export(WhileLoop(), (torch.tensor(0), torch.randn(4))), path)
    with pytest.raises(UnsupportedOpsError) as e:
        convert_torch_free("to_pte", path)
    text = str(e.value)
    assert "higher_order.while_loop" in text and "does not emit while_loop" in text, text
