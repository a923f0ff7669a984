"""The CI integrations as documented: the pre-commit hooks and docs/ci.md's Actions job run."""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml
from paths import REPO

ROOT = REPO
PT2X = [sys.executable, "-m", "pt2x.tools"]


def _run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=300, **kw)


def _entry(argv0: str) -> list[str]:
    # pre-commit runs the installed `pt2x` console script; run the same module with this Python.
    return PT2X if argv0 == "pt2x" else [argv0]


@pytest.fixture(scope="module")
def hooks() -> dict:
    with open(os.path.join(ROOT, ".pre-commit-hooks.yaml")) as f:
        return {h["id"]: h for h in yaml.safe_load(f)}


def test_hooks_declared(hooks):
    assert set(hooks) == {"pt2x-validate", "pt2x-schema-check"}
    assert re.search(hooks["pt2x-validate"]["files"], "models/encoder.pt2")
    assert not re.search(hooks["pt2x-validate"]["files"], "README.md")
    assert hooks["pt2x-schema-check"]["pass_filenames"] is False


def test_validate_hook_passes_good_files_and_fails_bad_ones(hooks, tmp_path):
    argv0, *args = shlex.split(hooks["pt2x-validate"]["entry"])
    good = sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "pt2", "torch-2.13.0", "*.pt2")))
    r = _run(_entry(argv0) + args + ["--target", "torch==2.10"] + good)
    assert r.returncode == 0, r.stdout + r.stderr
    bad = tmp_path / "broken.pt2"
    shutil.copy(good[0], bad)
    data = bytearray(bad.read_bytes())
    data[len(data) // 3] ^= 0xFF
    bad.write_bytes(bytes(data))
    r = _run(_entry(argv0) + args + [str(bad)])
    assert r.returncode in (1, 2)


def test_schema_check_hook_passes_on_this_repository(hooks):
    argv0, *args = shlex.split(hooks["pt2x-schema-check"]["entry"])
    r = _run(_entry(argv0) + args)
    assert r.returncode == 0, r.stdout + r.stderr


def test_documented_actions_job_commands_run():
    """Every `run:` step of docs/ci.md's GitHub Actions example, but the install, passes here."""
    with open(os.path.join(ROOT, "docs", "ci.md"), encoding="utf-8") as f:
        doc = f.read()
    job = doc.split("## GitHub Actions", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    steps = [s for s in yaml.safe_load(job)["jobs"]["schema-compat"]["steps"] if "run" in s]
    commands = [s["run"] for s in steps if not s["run"].startswith("pip install")]
    assert len(commands) == 3
    for cmd in commands:
        cmd = cmd.replace("origin/${{ github.base_ref }}", "HEAD")
        argv = shlex.split(cmd)
        files = [m for a in argv for m in (sorted(glob.glob(os.path.join(ROOT, a))) if "*" in a else [a])]
        if files[0] == "python":
            files[0] = sys.executable
        elif files[0] == "pt2x":
            files = PT2X + files[1:]
        if "schema" in files and "HEAD" in files and not os.path.isdir(os.path.join(ROOT, ".git")):
            pytest.skip("no git checkout to diff against")
        r = _run(files)
        assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"
