"""The strict JSON codec: torch's encoding exactly, and nothing accepted loosely."""

from __future__ import annotations

import io
import json
import math
import zipfile

import pytest
import torch

from pt2x.schema import definitions as d
from pt2x.serde.codec import json_codec
from pt2x.serde.errors import SchemaError
import zoo


def _model_json(ep) -> bytes:
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    with zipfile.ZipFile(buf) as z:
        (name,) = [n for n in z.namelist() if n.endswith("models/model.json")]
        return z.read(name)


@pytest.mark.parametrize("name", zoo.exportable_names())
def test_round_trip_is_byte_identical(name):
    """decode -> encode -> dumps reproduces torch's model.json byte for byte."""
    for decomposed in (False, True):
        raw = _model_json(zoo.exported(name, decomposed))
        program = json_codec.loads(d.ExportedProgram, raw, member="model.json")
        assert json_codec.dumps(program) == raw.decode()


def test_non_finite_floats():
    arg = json_codec.decode(d.Argument, {"as_floats": ["Infinity", "-Infinity", "NaN", 1, 2.5]})
    v = arg.value
    assert v[0] == math.inf and v[1] == -math.inf and math.isnan(v[2]) and v[3:] == [1.0, 2.5]
    assert json_codec.encode(arg) == {"as_floats": ["Infinity", "-Infinity", "NaN", 1.0, 2.5]}


@pytest.mark.parametrize(
    "tp, data, path, message",
    [
        (d.Argument, {}, "<root>", "exactly one key"),
        (d.Argument, {"as_int": 1.5}, "as_int", "expected int"),
        (d.Argument, {"as_int": True}, "as_int", "expected int"),
        (d.Argument, {"as_bool": 1}, "as_bool", "expected bool"),
        (d.Argument, {"as_string": None}, "as_string", "expected str"),
        (d.Argument, {"as_float": "Inf"}, "as_float", "expected float"),
        (d.Argument, {"as_scalar_type": 14}, "as_scalar_type", "not a ScalarType"),
        (d.Argument, {"as_ints": [1, "2"]}, "as_ints[1]", "expected int"),
        (d.Argument, {"as_tensor": {}}, "as_tensor", "missing required field 'name'"),
        (d.TensorMeta, [], "<root>", "expected TensorMeta"),
        (d.Graph, {"inputs": [], "outputs": [], "nodes": [], "tensor_values": {"x": {"dtype": 7}}, "sym_int_values": {}, "sym_bool_values": {}},
         "tensor_values['x']", "missing required field 'sizes'"),
    ],
)
def test_strictness(tp, data, path, message):
    with pytest.raises(SchemaError) as info:
        json_codec.decode(tp, data, member="m.json")
    assert info.value.path == path and message in str(info.value) and info.value.member == "m.json"


def test_defaults_fill_missing_optional_fields():
    node = json_codec.decode(d.Node, {"target": "t", "inputs": [], "outputs": [], "metadata": {}})
    assert node.name is None and node.is_hop_single_tensor_return is None
    assert json_codec.encode(node) == {"target": "t", "inputs": [], "outputs": [], "metadata": {}, "is_hop_single_tensor_return": None, "name": None}


def test_union_api():
    a = d.Argument(as_ints=[1, 2])
    assert a.type == "as_ints" and a.value == [1, 2] and a.as_ints == [1, 2]
    with pytest.raises(AttributeError):
        a.as_int
    with pytest.raises(TypeError):
        d.Argument(as_int=1, as_ints=[1])
    assert json.loads(json_codec.dumps(a)) == {"as_ints": [1, 2]}
