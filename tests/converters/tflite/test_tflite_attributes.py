"""Every attribute an ONNX node carries is read by its TFLite mapper, or refused: the declarations
(``converters/tflite/core/op_attributes.py``) held against onnx's own schemas, and the central check
(``core.mappers.maps``) seen refusing in a real conversion."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import AttributeProto, TensorProto, helper

from pt2x.converters import to_tflite
from pt2x.converters.errors import Unsupported, UnsupportedOpsError
from pt2x.converters.tflite.converter import load_mappers
from pt2x.converters.tflite.onnx_in.normalise import TARGET_OPSET
from pt2x.converters.tflite.core.op_attributes import ANY, ATTRIBUTES, check_attributes

_LATEST = onnx.defs.onnx_opset_version()


def _schemas(op: str) -> list:
    """The op's schemas at opsets TARGET_OPSET..latest (one per version)."""
    found = {}
    for v in range(TARGET_OPSET, _LATEST + 1):
        try:
            s = onnx.defs.get_schema(op, v)
        except onnx.defs.SchemaError:
            continue
        found[s.since_version] = s
    if not found:  # an ai.onnx.preview op mapped under its name (emit.PREVIEW_OPS)
        try:
            found[1] = onnx.defs.get_schema(op, 1, "ai.onnx.preview")
        except onnx.defs.SchemaError:
            pass
    return list(found.values())


def test_every_mapper_has_a_declaration_and_every_declaration_a_mapper():
    assert set(load_mappers()) == set(ATTRIBUTES)


@pytest.mark.parametrize("op", sorted(ATTRIBUTES))
def test_declared_attributes_exist_and_declared_values_are_valid(op):
    schemas = _schemas(op)
    assert schemas, f"{op} has no schema at opsets {TARGET_OPSET}..{_LATEST}"
    for name, allowed in ATTRIBUTES[op].items():
        specs = [s.attributes[name] for s in schemas if name in s.attributes]
        assert specs, f"{op} declares {name!r}, which no {op} schema from opset {TARGET_OPSET} has"
        if allowed is ANY:
            continue
        for value in allowed:
            default = specs[0].default_value
            is_default = default.name and _same(helper.get_attribute_value(default), value)
            in_doc = isinstance(value, str) and any(f"{value}" in s.doc for s in schemas)
            assert is_default or in_doc, f"{op}.{name}: {value!r} is neither the default nor a value the schema names"


def _same(a, b) -> bool:
    a = a.decode() if isinstance(a, bytes) else a
    return np.float32(a) == np.float32(b) if isinstance(a, float) else a == b


def _sample(spec) -> object:
    """A value of the attribute's type that is not its default."""
    t = spec.type
    default = helper.get_attribute_value(spec.default_value) if spec.default_value.name else None
    if t == AttributeProto.INT:
        return (default or 0) + 7
    if t == AttributeProto.FLOAT:
        return (default or 0.0) + 0.5
    return {AttributeProto.STRING: "not-a-value", AttributeProto.INTS: [3, 1], AttributeProto.FLOATS: [0.25],
            AttributeProto.STRINGS: ["x"], AttributeProto.TENSOR: helper.make_tensor("t", TensorProto.FLOAT, [1], [1.0])}.get(t)


@pytest.mark.parametrize("op", sorted(ATTRIBUTES))
def test_every_schema_attribute_is_declared_or_refused(op):
    """An attribute the mapper does not declare, or a value outside a declared tuple, is refused
    naming the op, the attribute and the value: nothing is silently ignored."""
    for schema in _schemas(op):
        for name, spec in schema.attributes.items():
            allowed = ATTRIBUTES[op].get(name)
            if allowed is ANY:
                continue
            value = _sample(spec)
            if value is None:  # graph-typed attributes are all declared (If/Loop bodies)
                continue
            node = helper.make_node(op, ["x"], ["y"], **{name: value})
            with pytest.raises(Unsupported) as e:
                check_attributes(node)
            assert f"{op} attribute {name!r} = " in e.value.reason


def test_declared_defaults_pass_the_check():
    for op, declared in ATTRIBUTES.items():
        for name, allowed in declared.items():
            if allowed is not ANY:
                for value in allowed:
                    check_attributes(helper.make_node(op, ["x"], ["y"], **{name: value}))


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def test_a_conversion_refuses_an_ignored_attribute_at_a_value_it_would_change():
    """MaxPool storage_order orders the indices; LayerNormalization stash_type=0 is not float32;
    an Attention sliding window changes which keys are attended."""
    pool = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], storage_order=1)],
                             "g", [_vi("x", [1, 1, 4, 4])], [_vi("y", None)])
    with pytest.raises(UnsupportedOpsError, match=r"ONNX MaxPool(.|\n)*MaxPool attribute 'storage_order' = 1"):
        to_tflite(helper.make_model(pool, opset_imports=[helper.make_opsetid("", 18)]))
    q = [_vi(n, [1, 2, 3, 4]) for n in "qkv"]
    att = helper.make_graph([helper.make_node("Attention", ["q", "k", "v"], ["y"], left_window_size=1)],
                            "g", q, [_vi("y", None)])
    with pytest.raises(UnsupportedOpsError, match=r"Attention attribute 'left_window_size' = 1: .* implements only -1"):
        to_tflite(helper.make_model(att, opset_imports=[helper.make_opsetid("", _LATEST)]))


def test_declared_values_still_convert_and_match_onnx_runtime():
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter

    g = helper.make_graph([helper.make_node("Gelu", ["x"], ["g"], approximate="tanh"),
                           helper.make_node("MaxPool", ["g"], ["y"], kernel_shape=[2, 2], storage_order=0)],
                          "g", [_vi("x", [1, 1, 4, 4])], [_vi("y", None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    x = np.random.default_rng(0).standard_normal((1, 1, 4, 4)).astype(np.float32) * 3
    it = Interpreter(model_content=to_tflite(m))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(it.get_tensor(it.get_output_details()[0]["index"]), want, rtol=1e-5, atol=1e-6)
