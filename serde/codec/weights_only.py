"""Torch's ``weights_only`` allow-list: the pickle globals ``torch.load(weights_only=True)`` accepts.

Why pt2x needs torch's list (besides its own, narrower one in ``pickle_reader``): torch loads
some members of a ``.pt2`` with ``weights_only=False`` (``use_pickle`` weights and constants,
custom objects) or falls back to it when the safe load fails (sample inputs,
``torch/_export/serde/serialize.py``'s ``deserialize_torch_artifact``). A pickle naming any
global outside this list therefore runs that global's code in torch, so pt2x treats it as
code (``serde.code_bearing``), whatever pt2x itself would do with it.

Facts from torch 2.13's ``torch/_weights_only_unpickler.py`` (``_get_allowed_globals``, the
dtype, tensor-class, storage-class, quantization-scheme and rebuild-function entries it adds;
and ``_read_global_instruction``, which renames protocol-2 modules through
``torch._utils.IMPORT_MAPPING`` before the look-up). Torch-free: names only.
"""

from __future__ import annotations

__all__ = ["TORCH_WEIGHTS_ONLY_GLOBALS", "torch_global_name", "outside_weights_only"]

_LEGACY_TENSORS = ("BFloat16", "Byte", "Char", "Double", "Float", "Half", "Int", "Long", "Short")
_LEGACY_STORAGES = (*_LEGACY_TENSORS, "Bool", "ComplexDouble", "ComplexFloat")
_DTYPES = (
    "bfloat16", "bits16", "bits1x8", "bits2x4", "bits4x2", "bits8", "bool", "complex128", "complex32",
    "complex64", "float16", "float32", "float4_e2m1fn_x2", "float64", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "qint32", "qint8", "quint2x4", "quint4x2", "quint8",
    *(f"int{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64)),
    *(f"uint{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64)),
)
_REBUILDERS = (
    "_rebuild_device_tensor_from_cpu_tensor", "_rebuild_device_tensor_from_numpy",
    "_rebuild_meta_tensor_no_storage", "_rebuild_nested_tensor", "_rebuild_parameter",
    "_rebuild_parameter_with_state", "_rebuild_qtensor", "_rebuild_sparse_tensor", "_rebuild_tensor",
    "_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_wrapper_subclass",
)
_QSCHEMES = (
    "per_channel_affine", "per_channel_affine_float_qparams", "per_channel_symmetric",
    "per_tensor_affine", "per_tensor_symmetric",
)

TORCH_WEIGHTS_ONLY_GLOBALS: frozenset[str] = frozenset(
    (
        "_codecs.encode",
        "builtins.bytearray", "builtins.complex", "builtins.set",
        "collections.Counter", "collections.OrderedDict",
        "torch.Size", "torch.Tensor", "torch.device",
        "torch.nn.parameter.Parameter",
        "torch.serialization._get_layout",
        "torch._tensor._rebuild_from_type_v2",
        "torch.storage.TypedStorage", "torch.storage.UntypedStorage",
        "torch.QInt32Storage", "torch.QInt8Storage", "torch.QUInt2x4Storage", "torch.QUInt4x2Storage",
        "torch.QUInt8Storage",
        *(f"torch.{t}" for t in _DTYPES + _QSCHEMES),
        *(f"torch._utils.{f}" for f in _REBUILDERS),
        *(f"{mod}.{t}Tensor" for mod in ("torch", "torch.cuda", "torch.sparse", "torch.cuda.sparse") for t in _LEGACY_TENSORS),
        *(f"{mod}.BoolTensor" for mod in ("torch", "torch.cuda")),
        *(f"{mod}.{t}Storage" for mod in ("torch", "torch.cuda") for t in _LEGACY_STORAGES),
    )
)
"""``module.name`` of every global torch 2.13's ``weights_only`` unpickler accepts (144 names)."""

_PROTOCOL_2_MODULES = {"__builtin__": "builtins"}
"""The one rename of ``torch._utils.IMPORT_MAPPING`` that leads into the list (pickle protocol 2
spells builtins ``__builtin__``); every other renamed module is outside it either way."""


def torch_global_name(name: str) -> str:
    """``name`` (``module.qualname``) as torch's look-up sees it: protocol-2 modules renamed."""
    module, dot, rest = name.partition(".")
    return _PROTOCOL_2_MODULES.get(module, module) + dot + rest if dot else name


def outside_weights_only(names: list[str]) -> list[str]:
    """The globals of ``names`` that ``torch.load(weights_only=True)`` refuses, in their order."""
    return [n for n in names if torch_global_name(n) not in TORCH_WEIGHTS_ONLY_GLOBALS]
