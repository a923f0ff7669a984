"""``pt2x scan`` discovery over real trees built in tmp_path: symbolic-link loops (a ``**``
glob over two ``-> .`` links used to walk 2^40 paths, one loop listed the same file 41
times), a tree deeper than Python's recursion limit (glob's recursive walk ended in
RecursionError, exit 3), links to files, hard links, hidden names, FIFOs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pt2x.serde.errors import Pt2UsageError
from pt2x.tools.scan.discover import discover
from paths import PT2_FIXTURES
from workshop import load_script

MLP = os.path.join(PT2_FIXTURES, "torch-2.13.0", "mlp_dynamic.pt2")
SCAN_STAGES = load_script("fuzz_scan_stages")  # the deep tree's builder and remover


def _locations(*args) -> list[str]:
    return [a.location for a in discover([str(a) for a in args])]


@pytest.fixture
def looped(tmp_path):
    """tmp/a/m.pt2 with two links back to their own folder (a/l1 -> ., a/l2 -> .)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.pt2").write_bytes(b"x")
    os.symlink(".", tmp_path / "a" / "l1")
    os.symlink(".", tmp_path / "a" / "l2")
    return tmp_path


@pytest.mark.parametrize("pattern", ["**/*.pt2", "a/**", "**", "a/*", "**/**/*.pt2"])
def test_two_link_loops_end_at_once_with_each_file_once(looped, pattern):
    t0 = time.monotonic()
    found = _locations(looped / pattern)
    assert time.monotonic() - t0 < 2
    assert found == [str(looped / "a" / "m.pt2")]


def test_a_linked_folder_is_never_entered(looped):
    with pytest.raises(Pt2UsageError, match="no artifacts in"):  # a/l1/m.pt2 would be the only match
        discover([str(looped / "*" / "*" / "*.pt2")])


def test_a_folder_walk_does_not_enter_linked_folders(looped):
    assert _locations(looped) == [str(looped / "a" / "m.pt2")]


DEPTH = max(1100, sys.getrecursionlimit() + 100)


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    """``deep/d/d/.../d/x.pt2``, ``DEPTH`` folders (made and removed as the fuzzer's scan stage
    makes its deep trees: pytest's own clean-up, shutil.rmtree, recurses past the limit here);
    the root and the file's path."""
    root = str(tmp_path_factory.mktemp("tree") / "deep")
    os.mkdir(root)
    leaf = os.path.join(SCAN_STAGES.nested_folders(root, DEPTH), "x.pt2")
    with open(leaf, "wb") as f:
        f.write(b"x")
    yield Path(root), leaf
    SCAN_STAGES.remove_tree(root)


def test_a_tree_deeper_than_the_recursion_limit(deep):
    root, leaf = deep
    assert _locations(root / "**" / "*.pt2") == [leaf]
    assert _locations(root) == [leaf]


def test_deep_tree_through_the_command(deep):
    """The whole ``pt2x scan``: the file is checked (unreadable: not a zip), exit 1, no traceback."""
    root, _ = deep
    r = subprocess.run([sys.executable, "-m", "pt2x", "scan", str(root / "**"), "--jobs", "1", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and '"unreadable": 1' in r.stdout


def test_a_file_named_twice_is_one_artifact_hard_links_are_two(tmp_path):
    (tmp_path / "models").mkdir()
    real = tmp_path / "models" / "a.pt2"
    real.write_bytes(b"x")
    os.symlink(real, tmp_path / "models" / "link.pt2")  # the same file through a link
    os.link(real, tmp_path / "models" / "hard.pt2")  # another name the user gave it
    found = _locations(tmp_path, tmp_path / "models" / "*.pt2", tmp_path / "models" / ".." / "models" / "a.pt2")
    assert found == [str(real), str(tmp_path / "models" / "hard.pt2")]


def test_globs_skip_hidden_names_folder_walks_do_not(tmp_path):
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "m.pt2").write_bytes(b"x")
    (tmp_path / ".h.pt2").write_bytes(b"x")
    os.mkfifo(tmp_path / "pipe.pt2")  # never a worker's input
    assert _locations(tmp_path) == [str(tmp_path / ".cache" / "m.pt2"), str(tmp_path / ".h.pt2")]
    with pytest.raises(Pt2UsageError, match="no artifacts in"):
        discover([str(tmp_path / "**" / "*.pt2")])
    assert _locations(tmp_path / ".cache" / "*.pt2") == [str(tmp_path / ".cache" / "m.pt2")]


def test_relative_globs_keep_the_users_spelling(tmp_path, monkeypatch):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "m.pt2").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    assert _locations("**/*.pt2") == [os.path.join("a", "b", "m.pt2")]
    assert _locations("a/*/m.pt2") == [os.path.join("a", "b", "m.pt2")]
    assert _locations("./a/b/[m]*") == [os.path.join(".", "a", "b", "m.pt2")]


def test_an_unreadable_folder_is_a_usage_error(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads every folder")
    (tmp_path / "locked").mkdir(mode=0o000)
    try:
        with pytest.raises(Pt2UsageError, match="cannot read .*locked: permission denied"):
            discover([str(tmp_path / "**" / "*.pt2")])
    finally:
        os.chmod(tmp_path / "locked", 0o755)
