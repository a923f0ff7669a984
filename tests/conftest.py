"""Test-wide settings live in pyproject.toml ([tool.pytest.ini_options]): helpers in
tests/support/ are importable as plain modules (``import zoo``) through its ``pythonpath``."""

import importlib.util


def pytest_configure(config):
    """torchvision from the registry is a CUDA build; next to the CPU torch its C++ ops do not
    register and ``import torchvision`` fails, and transformers imports torchvision whenever it
    is installed. Define its ``nms`` in plain torch first (tests/support/torchvision_ops.py)."""
    if importlib.util.find_spec("torchvision") is not None and importlib.util.find_spec("torch") is not None:
        from torchvision_ops import register_torchvision_ops

        register_torchvision_ops()
