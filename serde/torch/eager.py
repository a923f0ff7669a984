"""A program run in torch eager on numpy inputs: the reference ``pt2x verify`` compares against.

``run_program(src, flat_inputs, model=, capture=)``: the program is loaded safely
(``load_exported_program``: no pickle), its ``module()`` is run on the flat user inputs (tensors
as numpy arrays, constants as Python values, in the program's input order) through a
``torch.fx.Interpreter``, and the flat user outputs come back as numpy arrays. With ``capture``,
the value of every top-level ``call_function`` node that is one tensor is kept too, keyed by the
node's name, which is the program's value name (the name pt2x's ONNX and TFLite give the same
value). bfloat16 tensors come back as ``ml_dtypes.bfloat16`` arrays.

``tensors_from_arrays`` / ``arrays_from_tensors``: the same conversions for a runtime that takes
and gives torch tensors (ExecuTorch's ``executorch.runtime``, run by ``pt2x verify``).
"""

from __future__ import annotations

import numpy as np

from .api import _import_torch

__all__ = ["run_program", "tensors_from_arrays", "arrays_from_tensors"]


def _to_torch(torch, x):
    if not isinstance(x, np.ndarray):
        return x
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(np.array(x, order="C").view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(np.array(x, copy=True))


def _to_numpy(torch, t) -> np.ndarray:
    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    t = t.detach()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16).copy()
    if t.is_quantized:
        t = t.dequantize()
    return t.contiguous().numpy().copy()


def tensors_from_arrays(arrays: list) -> list:
    """numpy arrays (and Python values, kept) as torch tensors."""
    torch = _import_torch("running an ExecuTorch program on numpy inputs")
    return [_to_torch(torch, x) for x in arrays]


def arrays_from_tensors(values) -> list[np.ndarray]:
    """torch tensors (and other values, as numpy sees them) as numpy arrays."""
    torch = _import_torch("reading an ExecuTorch program's outputs")
    return [_to_numpy(torch, t) for t in values]


def _register_quantized_ops() -> None:
    """PT2E programs call ``quantized_decomposed`` ops, which torch registers only when this module
    of its own is imported (a user's process has usually imported it through their quantizer)."""
    try:
        import torch.ao.quantization.fx._decomposed  # noqa: F401
    except ImportError:  # a torch without it: the program's load names the missing operator
        pass


def run_program(src, flat_inputs: list, *, model: str = "model",
                capture: bool = False) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """``(outputs, intermediates)`` of the program in torch eager (see the module docstring)."""
    torch = _import_torch("pt2x verify's torch eager reference")
    from torch.utils._pytree import tree_flatten

    from .deserialize import load_exported_program

    _register_quantized_ops()
    ep = load_exported_program(src, model=model)
    module = ep.module()
    kept: dict[str, np.ndarray] = {}

    class Capture(torch.fx.Interpreter):
        def run_node(self, n):
            value = super().run_node(n)
            if capture and n.op == "call_function" and isinstance(value, torch.Tensor):
                kept[n.name] = _to_numpy(torch, value)
            return value

    args = [_to_torch(torch, x) for x in flat_inputs]
    with torch.no_grad():
        out = Capture(module).run(*args)
    leaves, _ = tree_flatten(out)
    return [_to_numpy(torch, t) for t in leaves], kept
