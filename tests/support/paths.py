"""Where the tests' committed material lives."""

import os

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The tests/ folder."""
REPO = os.path.dirname(TESTS)
"""The repository root (the pt2x package)."""
FIXTURES = os.path.join(TESTS, "fixtures")
"""Committed test material."""
PT2_FIXTURES = os.path.join(FIXTURES, "pt2")
"""Files written by torch.export.save of several torch releases (tests/fixtures/pt2/torch-*/)."""
