"""Helpers comparing what pt2x read with what torch holds (tests only)."""

from __future__ import annotations

import numpy as np
import torch

_INPUT_KINDS = {
    "USER_INPUT": "user_input",
    "PARAMETER": "parameter",
    "BUFFER": "buffer",
    "CONSTANT_TENSOR": "tensor_constant",
    "CUSTOM_OBJ": "custom_obj",
    "TOKEN": "token",
}
_OUTPUT_KINDS = {
    "USER_OUTPUT": "user_output",
    "LOSS_OUTPUT": "loss_output",
    "BUFFER_MUTATION": "buffer_mutation",
    "GRADIENT_TO_PARAMETER": "gradient_to_parameter",
    "GRADIENT_TO_USER_INPUT": "gradient_to_user_input",
    "USER_INPUT_MUTATION": "user_input_mutation",
    "TOKEN": "token",
    "PARAMETER_MUTATION": "parameter_mutation",
}


def assert_array_equals_tensor(arr: np.ndarray, t: torch.Tensor, what: str) -> None:
    """Bit-for-bit: dtype, shape, strides (in elements) and every byte of every element."""
    t = t.detach()
    assert tuple(arr.shape) == tuple(t.shape), f"{what}: shape {arr.shape} != {tuple(t.shape)}"
    assert str(arr.dtype) == str(t.dtype).replace("torch.", "").replace("float8_e4m3fn", "float8_e4m3fn"), f"{what}: dtype {arr.dtype} vs {t.dtype}"
    if arr.size:
        assert tuple(s // arr.itemsize for s in arr.strides) == tuple(t.stride()), f"{what}: strides {arr.strides} vs {t.stride()}"
    got = np.ascontiguousarray(arr).view(np.uint8).tobytes()
    want = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    assert got == want, f"{what}: bytes differ"


def assert_weights_match(model, ep) -> None:
    """Every state_dict entry and tensor constant pt2x read equals torch's, bit for bit."""
    assert set(model.state_dict) == set(ep.state_dict)
    for fqn, t in ep.state_dict.items():
        assert_array_equals_tensor(model.state_dict[fqn], t, fqn)
    tensors = {k: v for k, v in ep.constants.items() if isinstance(v, torch.Tensor)}
    assert set(model.constants) == set(tensors)
    for fqn, t in tensors.items():
        assert_array_equals_tensor(model.constants[fqn], t, fqn)


def input_specs(ep) -> list[tuple]:
    out = []
    for s in ep.graph_signature.input_specs:
        name = getattr(s.arg, "name", None)
        out.append((_INPUT_KINDS[s.kind.name], name, s.target, s.persistent if s.kind.name == "BUFFER" else None))
    return out


def output_specs(ep) -> list[tuple]:
    return [(_OUTPUT_KINDS[s.kind.name], getattr(s.arg, "name", None), s.target) for s in ep.graph_signature.output_specs]


def range_constraints(ep) -> dict[str, tuple]:
    import sympy

    def bound(v):
        if v in (sympy.oo, -sympy.oo) or str(v) in ("oo", "-oo", "int_oo", "-int_oo"):
            return None
        return int(v)

    return {str(k): (bound(v.lower), bound(v.upper)) for k, v in ep.range_constraints.items()}


def target_text(target) -> str:
    """The tail torch's serializer writes for a call_function target (op.overload or builtin name)."""
    if isinstance(target, torch._ops.OpOverload):
        return f"{target._opname}.{target._overloadname}"
    if isinstance(target, torch._ops.HigherOrderOperator):
        return target.name()
    return getattr(target, "__name__", str(target))
