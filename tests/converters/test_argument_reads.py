"""Every argument is read or refused (``converters/aten/reads.py``): a lowering that leaves an
argument given a non-default value unread makes its node unsupported, named in the report with
the argument and its value; a default left unread, a declared argument and a value-neutral one
pass; what a lowering binds of another node (a producer it looks at) reads nothing of its own."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pt2x.converters import to_onnx, to_tflite
from pt2x.converters.aten import registry
from pt2x.converters.aten.args import bind, reading
from pt2x.converters.aten.reads import unread_arguments
from pt2x.converters.errors import UnsupportedOpsError
from pt2x.converters.onnx.converter import _load_lowerings
from pt2x.schema import definitions as d

SOFTPLUS = "aten.softplus.default"


class _Softplus(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, x):
        return F.softplus(x, **self.kw)


def _saved(tmp_path, **kw) -> str:
    path = str(tmp_path / "softplus.pt2")
    torch.export.save(torch.export.export(_Softplus(**kw), (torch.randn(3, 4),)), path)
    return path


@pytest.fixture
def softplus_ignoring_beta():
    """The shipped softplus lowering replaced by one that reads ``self`` and nothing else (as a
    lowering written before ``beta`` mattered would), restored afterwards."""
    _load_lowerings()
    shipped = registry.get("onnx", SOFTPLUS)

    def softplus_self_only(ctx, node):
        return ctx.op("Softplus", ctx.t(bind(node, "self").self))

    registry.register("onnx", SOFTPLUS, softplus_self_only, override=True)
    yield
    registry.register("onnx", SOFTPLUS, shipped, override=True)


@pytest.mark.parametrize("convert", [to_onnx, to_tflite], ids=["onnx", "tflite"])
def test_an_argument_the_lowering_does_not_read_is_refused(tmp_path, softplus_ignoring_beta, convert):
    with pytest.raises(UnsupportedOpsError) as e:
        convert(_saved(tmp_path, beta=2.0))
    assert [p.target for p in e.value.ops] == [SOFTPLUS], str(e.value)
    text = str(e.value)
    assert "argument beta=2.0 is not supported" in text and "softplus_self_only does not read it" in text, text
    assert "softplus = aten.softplus.default(self=x, beta=2.0)" in text, text


def test_a_default_left_unread_converts(tmp_path, softplus_ignoring_beta):
    """beta and threshold at torch's defaults (left out, or written out equal to them)."""
    to_onnx(_saved(tmp_path))
    to_onnx(_saved(tmp_path, beta=1, threshold=20.0))


def test_the_shipped_softplus_reads_beta(tmp_path):
    to_onnx(_saved(tmp_path, beta=2.0, threshold=5.0))


def _node(target: str, **args) -> d.Node:
    ins = [d.NamedArgument(name=k, arg=v, kind=d.ArgumentKind.KEYWORD if i else d.ArgumentKind.POSITIONAL)
           for i, (k, v) in enumerate(args.items())]
    return d.Node(target=target, inputs=ins, outputs=[d.Argument(as_tensor=d.TensorArgument(name="y"))], metadata={},
                  name="n")


def _x(name="x"):
    return d.Argument(as_tensor=d.TensorArgument(name=name))


def test_declared_optional_and_neutral_arguments_count_as_read():
    node = _node("aten._to_copy.default", self=_x(), dtype=d.Argument(as_scalar_type=d.ScalarType.HALF),
                 device=d.Argument(as_device=d.Device(type="cpu")), non_blocking=d.Argument(as_bool=True),
                 memory_format=d.Argument(as_none=True))
    with reading() as log:
        a = bind(node, "self")
        a.self
    assert [n for n, _ in unread_arguments(node, log)] == ["dtype"]
    with reading() as log:
        a = bind(node, "self")
        a.self
        a.declare("dtype")
    assert unread_arguments(node, log) == []


def test_positional_reads_and_another_nodes_bind():
    """``a[i]`` reads argument i; binding a producer node (as ``index`` binds an ``arange``)
    reads none of the node's own arguments."""
    node = _node(SOFTPLUS, self=_x(), beta=d.Argument(as_float=2.0), threshold=d.Argument(as_float=3.0))
    other = _node(SOFTPLUS, self=_x("z"), beta=d.Argument(as_float=2.0), threshold=d.Argument(as_float=3.0))
    with reading() as log:
        bind(node)[0]
        b = bind(other)
        b.beta, b.threshold
    assert [n for n, _ in unread_arguments(node, log)] == ["beta", "threshold"]
    with reading() as log:
        bind(node).items()
    assert unread_arguments(node, log) == []


def test_a_custom_op_lowering_that_binds_nothing_is_not_checked():
    """No signature to know defaults from, and no bind to know reads from: the lowering reads
    its node its own way."""
    node = _node("pt2x_test.anything.default", x=_x(), k=d.Argument(as_int=3))
    with reading() as log:
        pass
    assert unread_arguments(node, log) == []
    with reading() as log:
        bind(node, k=1).x
    assert unread_arguments(node, log) == [("k", 3)]
