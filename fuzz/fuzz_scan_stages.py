"""The fuzzer's ``pt2x scan`` stages (``fuzz/fuzz.py``): discovery over hostile trees,
and ``--resume`` over mutated results files. Both are made from the case's index alone, and
run on every ``SCAN_EVERY``-th and ``RESUME_EVERY``-th case (passing the others), so that the
test's budget stays what it was: a tree costs tens of milliseconds, a results file one, and the
deep tree of every ``DEEP_EVERY``-th case seconds (each of its paths has 1,100 parts).

``scan``    a tree laid out in the case's scratch folder with the case file in it: folders
            linking back to themselves and to their parent (``-> .``, ``-> ..``), a link to
            the case file, a FIFO, a hidden folder, a chain of folders (every ``DEEP_EVERY``-th
            case deeper than Python's recursion limit); ``discover`` over the folder and over
            ``**`` globs must end within ``SCAN_SECONDS``, list regular files only, each file
            once, and find the case file.
``resume``  a results file of good records with one to three mutations (a field replaced by a
            value of another type, NaN, a negative or huge number, brackets nested past the
            recursion limit, a line cut short, garbage, a record that is not an object);
            ``ResultsFile.previous`` and the summary over what it yields must end in records or
            a ``Pt2UsageError`` (exit 2), nothing else.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import shutil
import stat
import tempfile
import time

__all__ = ["stage_scan", "stage_resume", "DiscoveryBroken", "SCAN_EVERY", "RESUME_EVERY", "DEEP_EVERY", "SCAN_SECONDS",
           "nested_folders", "remove_tree"]

SCAN_EVERY = 25  # a tree costs tens of ms (folders made and removed): a few per test budget
RESUME_EVERY = 5
DEEP_EVERY = 500  # a multiple of SCAN_EVERY
SCAN_SECONDS = 5.0
_DEEP = 1100


class DiscoveryBroken(Exception):
    """``discover`` took too long, listed something twice or not a regular file, or missed the case."""


def remove_tree(root: str) -> None:
    """``shutil.rmtree`` without its recursion (1,100 folders deep is past Python's limit) and
    without long paths: each sub-folder is first moved up to ``root`` itself, so every path
    stays short. Links are removed, never followed."""
    if not os.path.lexists(root):
        return
    pending, moved = [root], []
    while pending:
        folder = pending.pop()
        with os.scandir(folder) as it:
            entries = list(it)
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                up = os.path.join(root, f".up{len(moved)}")
                os.rename(e.path, up)
                moved.append(up)
                pending.append(up)
            else:
                os.unlink(e.path)
    for folder in moved:
        os.rmdir(folder)
    os.rmdir(root)


def nested_folders(folder: str, depth: int) -> str:
    """``depth`` folders ``d/d/...`` under ``folder``, made relative to an open descriptor (each
    step costs the same however deep); the innermost one's path."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    return os.path.join(folder, *(["d"] * depth))


_deep_chain: str | None = None  # this worker's 1,100 nested folders, made once (mkdir/rmdir are slow)


def _cached_deep_chain() -> str:
    """A folder holding ``d/d/.../d`` ``_DEEP`` deep, made on first use and removed when the
    worker exits (a worker that is killed leaves it, and the next worker to make one removes it)."""
    global _deep_chain
    if _deep_chain is None:
        _remove_stale_chains()
        holder = os.path.join(tempfile.gettempdir(), f"pt2x-fuzz-deep-{os.getpid()}")
        remove_tree(holder)
        os.mkdir(holder)
        nested_folders(holder, _DEEP)
        atexit.register(remove_tree, holder)
        _deep_chain = holder
    return _deep_chain


def _remove_stale_chains() -> None:
    """The chains of workers that were killed (a worker is stopped, not asked to exit)."""
    for name in os.listdir(tempfile.gettempdir()):
        pid = name.removeprefix("pt2x-fuzz-deep-")
        if name.startswith("pt2x-fuzz-deep-") and pid.isdigit() and not _alive(int(pid)):
            remove_tree(os.path.join(tempfile.gettempdir(), name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tree(root: str, case_path: str, rng: random.Random, deep: bool) -> str:
    """Lay out the hostile tree under ``root``; the case file's path in it. A deep tree borrows
    the cached chain (renamed in, renamed back by ``_untree``)."""
    remove_tree(root)
    os.makedirs(os.path.join(root, "a", ".hidden"))
    if deep:
        os.rename(os.path.join(_cached_deep_chain(), "d"), os.path.join(root, "a", "d"))
        folder = os.path.join(root, "a", *(["d"] * _DEEP))
    else:
        folder = nested_folders(os.path.join(root, "a"), rng.randrange(0, 20))
    case = os.path.join(folder, "case.pt2")
    shutil.copyfile(case_path, case)
    for i in range(rng.randrange(1, 4)):
        os.symlink(rng.choice([".", "..", root, "../.."]), os.path.join(root, "a", f"loop{i}"))
    os.symlink(case, os.path.join(root, "a", "link.pt2"))
    if hasattr(os, "mkfifo"):
        os.mkfifo(os.path.join(root, "a", "pipe.pt2"))
    with open(os.path.join(root, "a", ".hidden", "h.pt2"), "wb") as f:
        f.write(b"PK")
    return case


def _untree(root: str, case: str, deep: bool) -> None:
    if deep and os.path.lexists(case):
        os.unlink(case)
        os.rename(os.path.join(root, "a", "d"), os.path.join(_cached_deep_chain(), "d"))
    remove_tree(root)


def stage_scan(scratch: str, case_path: str, index: int) -> None:
    from pt2x.serde.errors import Pt2UsageError
    from pt2x.tools.scan.discover import discover

    if index % SCAN_EVERY:
        return
    rng = random.Random(f"scan:{index}")
    deep = index > 0 and index % DEEP_EVERY == 0
    # a deep tree lives outside the scratch folder: the fuzzer's own clean-up (shutil.rmtree)
    # recurses, and would fail on it if this worker were killed before removing it
    root = os.path.join(tempfile.gettempdir() if deep else scratch, f"pt2x-fuzz-scan-tree-{os.getpid()}")
    case = _tree(root, case_path, rng, deep)
    try:
        args = [root] + ([] if deep else [os.path.join(root, "**", "*.pt2"), os.path.join(root, "a", "**")])
        for arg in args:
            t0 = time.monotonic()
            try:
                found = discover([arg])
            except Pt2UsageError as e:
                raise DiscoveryBroken(f"discover({arg!r}) refused a tree it can walk: {e}") from e
            if time.monotonic() - t0 > SCAN_SECONDS:
                raise DiscoveryBroken(f"discover({arg!r}) took {time.monotonic() - t0:.1f} s")
            stats = [os.stat(a.location) for a in found]
            files = [(st.st_dev, st.st_ino) for st in stats]
            if len(set(files)) != len(files):
                raise DiscoveryBroken(f"discover({arg!r}) listed a file twice: {[a.location for a in found][:5]}")
            if (lambda st: (st.st_dev, st.st_ino))(os.stat(case)) not in files:
                raise DiscoveryBroken(f"discover({arg!r}) missed {case}")
            if not all(stat.S_ISREG(st.st_mode) for st in stats):
                raise DiscoveryBroken(f"discover({arg!r}) listed something that is not a regular file")
    finally:
        _untree(root, case, deep)


# ---------------------------------------------------------------------------- resume files

_GOOD = {"path": "a.pt2", "size": 10, "verdict": "findings", "seconds": 0.5,
         "models": {"model": {"schema_version": "8.20", "torch_version": "2.13.0", "node_count": 3,
                              "ops": {"aten.relu": 1}}},
         "readable": True, "valid": False, "target": "torch==2.10",
         "findings": [{"severity": "error", "code": "bad-dtype", "message": "m", "member": None, "path": None}],
         "findings_total": 1, "blockers": {"bad-dtype": 1},
         "conversions": {"onnx": {"model": {"result": "unsupported", "unsupported": {"aten.x": 2}, "seconds": 0.1}}},
         "error": {"class": "ArchiveError", "message": "m", "reason": "r"}}
_ODD_VALUES = ("boom", ["ok"], {"a": 1}, 5, -1, 1.5, 10**30, True, None, float("nan"), float("inf"), "", [], {},
               {"class": ["x"], "message": 3}, [{"severity": 1}], {"x": {"y": "z"}}, "\udcff\n\x1b[2J")


def _record_mutation(rng: random.Random, record: dict) -> str:
    where = record
    path = []
    while True:  # walk down to a field, sometimes stopping at a nested one
        key = rng.choice(sorted(where))
        path.append(key)
        if isinstance(where[key], dict) and where[key] and rng.random() < 0.5:
            where = where[key]
            continue
        if isinstance(where[key], list) and where[key] and isinstance(where[key][0], dict) and rng.random() < 0.5:
            where = where[key][0]
            continue
        break
    if rng.random() < 0.15:
        del where[key]
        return f"{'.'.join(map(str, path))} removed"
    where[key] = rng.choice(_ODD_VALUES)
    return f"{'.'.join(map(str, path))} = {where[key]!r}"[:120]


def _line_mutation(rng: random.Random, lines: list[str]) -> str:
    what = rng.choice(["cut", "garbage", "nested", "not-object", "blank", "huge-number"])
    i = rng.randrange(len(lines))
    if what == "cut":
        lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    elif what == "garbage":
        lines[i] = rng.choice(["\x00\xff", "{", "}", "[1, 2", "null", '"path"'])
    elif what == "nested":
        lines[i] = "[" * 100_000 + "]" * rng.choice([0, 100_000])
    elif what == "not-object":
        lines[i] = json.dumps([_GOOD])
    elif what == "blank":
        lines[i] = ""
    else:
        lines[i] = lines[i].replace('"size": 10', '"size": 1' + "0" * 5000)
    return f"line {i + 1}: {what}"


def stage_resume(scratch: str, index: int) -> list[str]:
    """Resume from a mutated results file; returns what was mutated (for the report)."""
    from pt2x.serde.errors import Pt2UsageError
    from pt2x.tools.scan.report import Summary
    from pt2x.tools.scan.results import ResultsFile

    if index % RESUME_EVERY:
        return []
    rng = random.Random(f"resume:{index}")
    records = [json.loads(json.dumps(_GOOD)) for _ in range(3)]
    for i, r in enumerate(records):
        r["path"] = f"m{i}.pt2"
    steps = [_record_mutation(rng, rng.choice(records)) for _ in range(rng.randrange(1, 4))]
    lines = [json.dumps(r) for r in records]
    if rng.random() < 0.3:
        steps.append(_line_mutation(rng, lines))
    path = os.path.join(scratch, f"resume-{os.getpid()}.jsonl")
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write("\n".join(lines) + ("\n" if rng.random() < 0.8 else ""))
    summary = Summary("torch==2.10", ("onnx",))
    try:
        for record in ResultsFile(path, resume=True).previous():
            summary.add(record)
        summary.as_dict()
        summary.table()
    except Pt2UsageError:
        pass  # the file refused, naming the line: what a user sees as exit 2
    finally:
        os.unlink(path)
    return steps
