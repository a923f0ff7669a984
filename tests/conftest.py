import os
import sys

# tests/ helpers (zoo, torchfree) import as plain modules.
sys.path.insert(0, os.path.dirname(__file__))

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
