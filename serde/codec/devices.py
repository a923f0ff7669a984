"""Torch's device types: which device a tensor's ``Device`` may name in a pickle torch loads.

Why: the older layouts (torch 2.6-2.8) keep weights as ``torch.save`` pickles, whose storages
carry a location string (``cpu``, ``cuda:0``) that ``torch.load`` parses with ``torch.device``.
A device type outside torch's table, or an index outside ``DeviceIndex`` (``int8_t``: 0-127;
torch wraps 128 to -128 and 300 to 44), writes a pickle torch cannot load or loads onto the
wrong device, so the writer refuses it naming the field (``legacy_layout``).

Facts from c10/core/Device.cpp's ``parse_type`` (torch 2.13; 2.6 accepts the same names).
"""

from __future__ import annotations

__all__ = ["DEVICE_TYPES", "MAX_DEVICE_INDEX", "device_problem", "location"]

DEVICE_TYPES = frozenset({
    "cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia",
    "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone",
})
"""Every device type ``torch.device`` parses."""

MAX_DEVICE_INDEX = 127
"""``c10::DeviceIndex`` is an ``int8_t``; -1 means "no index" and is written as none."""


def device_problem(device_type: object, index: object) -> str | None:
    """Why ``torch.device(type, index)`` would refuse or alter this device, or None when it is exact."""
    if not isinstance(device_type, str) or device_type not in DEVICE_TYPES:
        return f"device type {device_type!r} is not one torch knows ({', '.join(sorted(DEVICE_TYPES))})"
    if index is None:
        return None
    if type(index) is not int or not 0 <= index <= MAX_DEVICE_INDEX:
        return f"device index {index!r} is outside 0..{MAX_DEVICE_INDEX} (torch's DeviceIndex)"
    return None


def location(device_type: str, index: int | None) -> str:
    """The location string ``torch.save`` writes for a storage on this (checked) device."""
    return device_type if index is None else f"{device_type}:{index}"
