"""Test-wide settings live in pyproject.toml ([tool.pytest.ini_options]): helpers in
tests/support/ are importable as plain modules (``import zoo``) through its ``pythonpath``."""
