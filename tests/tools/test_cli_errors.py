"""Errors a user can act on: bad input or output paths, missing extras, invalid shape
expressions, file modes. Each case runs the real ``pt2x`` command (``main`` in process, or a
subprocess where a dependency must be missing) and checks the exit code and the one line
it prints; an internal bug still shows its traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import stat
import subprocess
import sys
import zipfile

import shutil
import tempfile

import pytest

from pt2x.serde.errors import MissingExtraError, Pt2Error, Pt2UsageError
from pt2x.tools.cli import main
from torchfree import run_cli_torch_free
from paths import PT2_FIXTURES

FIX = os.path.join(PT2_FIXTURES)
MLP = os.path.join(FIX, "torch-2.13.0", "mlp_dynamic.pt2")
# every way ``convert`` writes a file: (--to, extra arguments)
WRITERS = [("onnx", []), ("pt2", ["--target-schema", "torch==2.13"]), ("tflite", [])]
NOBODY = 65534


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _convert(to: str, extra: list[str], src: str, dst: str) -> list[str]:
    return ["convert", src, "--to", to, "-o", dst, *extra]


def _leftovers(folder) -> list[str]:
    """Files a failed write left behind (temporary files included)."""
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


# ------------------------------------------------------------------ output paths


@pytest.mark.parametrize("to,extra", WRITERS)
def test_output_folder_missing(capsys, tmp_path, to, extra):
    dst = tmp_path / "no" / "such" / f"out.{to}"
    rc, _, err = _cli(capsys, *_convert(to, extra, MLP, str(dst)))
    line = _one_line(err)
    assert rc == 2
    assert line == f"pt2x convert: cannot write {dst}: folder {dst.parent} does not exist"
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("to,extra", WRITERS)
def test_output_is_a_directory(capsys, tmp_path, to, extra):
    rc, _, err = _cli(capsys, *_convert(to, extra, MLP, str(tmp_path)))
    assert rc == 2
    assert _one_line(err) == f"pt2x convert: cannot write {tmp_path}: it is a directory"
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("to,extra", WRITERS)
def test_output_folder_is_a_file(capsys, tmp_path, to, extra):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"x")
    dst = blocker / "out.bin"
    rc, _, err = _cli(capsys, *_convert(to, extra, MLP, str(dst)))
    assert rc == 2
    assert _one_line(err) == f"pt2x convert: cannot write {dst}: {blocker} is not a folder"


@pytest.fixture
def shared_tmp():
    """A folder every user may enter (pytest's own tmp_path is private to its owner)."""
    path = tempfile.mkdtemp(prefix="pt2x-cli-")
    os.chmod(path, 0o755)
    yield pathlib.Path(path)
    for root, dirs, _ in os.walk(path):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    shutil.rmtree(path)


def _as_unprivileged(argv: list[str]) -> tuple[int, str]:
    """Run ``main(argv)`` in a forked child that is not root (root may write anywhere):
    the child drops to ``nobody`` when this process is root. Returns (exit code, stderr)."""
    import pt2x.converters.onnx  # noqa: F401  (imported here: the child may not read the stdlib under /root)
    import pt2x.serde.compat.plan  # noqa: F401
    import pt2x.tools.cmd_convert  # noqa: F401

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code, err = 99, ""
        try:
            os.close(r)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            buf = io.StringIO()
            with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(io.StringIO()):
                code = main(argv)
            err = buf.getvalue()
        except BaseException as e:  # report, never return into pytest from the child
            err = f"child failed: {e!r}"
        finally:
            os.write(w, json.dumps([code, err]).encode())
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    code, err = json.loads(data)
    return code, err


@pytest.mark.parametrize("to,extra", WRITERS)
def test_output_folder_not_writable(shared_tmp, to, extra):
    src = shared_tmp / "in.pt2"
    src.write_bytes(open(MLP, "rb").read())
    src.chmod(0o644)
    locked = shared_tmp / "locked"
    locked.mkdir(mode=0o555)
    dst = locked / f"out.{to}"
    rc, err = _as_unprivileged(_convert(to, extra, str(src), str(dst)))
    assert rc == 2, err
    assert _one_line(err) == f"pt2x convert: cannot write {dst}: permission denied"
    assert _leftovers(locked) == []


def test_existing_output_not_writable(shared_tmp):
    """ONNX overwrites in place: a read-only existing file is refused before converting."""
    shared_tmp.chmod(0o777)
    dst = shared_tmp / "out.onnx"
    dst.write_bytes(b"old")
    dst.chmod(0o444)
    rc, err = _as_unprivileged(_convert("onnx", [], MLP, str(dst)))
    assert rc == 2, err
    assert _one_line(err) == f"pt2x convert: cannot write {dst}: permission denied"
    assert dst.read_bytes() == b"old"


def test_output_error_during_write(capsys, tmp_path):
    """What only the write can tell (here: /proc refuses new files) still ends in one line."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs Linux /proc")
    dst = "/proc/pt2x-cannot-exist.pt2"
    rc, _, err = _cli(capsys, *_convert(*WRITERS[1], MLP, dst))
    assert rc == 2
    assert _one_line(err).startswith(f"pt2x convert: cannot write {dst}: ")


def test_api_write_error_names_the_path(tmp_path):
    """The Python API keeps raising OSError, but about the user's path, not a temporary file."""
    from pt2x.serde.archive.zip_writer import write_archive

    dst = tmp_path / "missing" / "out.pt2"
    with pytest.raises(FileNotFoundError) as info:
        write_archive(dst, [("out/a", b"x")])
    assert info.value.filename == str(dst)
    with pytest.raises(IsADirectoryError) as info:
        write_archive(tmp_path, [("out/a", b"x")])
    assert info.value.filename == str(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(Pt2UsageError, match="not a regular file"):  # renaming over it would replace it
        write_archive(fifo, [("out/a", b"x")])
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert _leftovers(tmp_path) == ["fifo"]


# ------------------------------------------------------------------ input paths


def _input_cases(tmp_path) -> dict[str, tuple[str, str]]:
    fifo = tmp_path / "fifo.pt2"
    os.mkfifo(fifo)
    return {
        "missing": (str(tmp_path / "nope.pt2"), "no such file or directory"),
        "directory": (str(tmp_path), "it is a directory"),
        "fifo": (str(fifo), "not a regular file"),  # would block the reader forever
    }


@pytest.mark.parametrize("case", ["missing", "directory", "fifo"])
def test_input_path_problems(capsys, tmp_path, case):
    path, why = _input_cases(tmp_path)[case]
    want = f"cannot read {path}: {why}"
    rc, _, err = _cli(capsys, "inspect", path)
    assert (rc, _one_line(err)) == (2, f"pt2x inspect: {want}")
    rc, _, err = _cli(capsys, "validate", path)
    assert (rc, _one_line(err)) == (2, f"{path}: unreadable: {want}")
    rc, out, _ = _cli(capsys, "validate", "--json", path)
    assert rc == 2 and json.loads(out)["error"] == want
    rc, _, err = _cli(capsys, *_convert("onnx", [], path, str(tmp_path / "o.onnx")))
    assert (rc, _one_line(err)) == (2, f"pt2x convert: {want}")


def test_input_not_readable(shared_tmp):
    src = shared_tmp / "secret.pt2"
    src.write_bytes(open(MLP, "rb").read())
    src.chmod(0o000)
    for argv, prefix in ((["inspect", str(src)], "pt2x inspect: "), (["validate", str(src)], f"{src}: unreadable: ")):
        rc, err = _as_unprivileged(argv)
        assert (rc, _one_line(err)) == (2, f"{prefix}cannot read {src}: permission denied")


# ------------------------------------------------------------------ missing extras


def _run_without(modules: list[str], code: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``code`` where importing any of ``modules`` fails, as when the extra is not installed."""
    prelude = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    return subprocess.run([sys.executable, "-c", prelude + code, *args], capture_output=True, text=True, timeout=120)


_CLI = "from pt2x.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def test_cli_without_onnx(tmp_path):
    dst = tmp_path / "o.onnx"
    r = _run_without(["onnx"], _CLI, *_convert("onnx", [], MLP, str(dst)))
    assert r.returncode == 2, r.stderr
    assert _one_line(r.stderr) == (
        "pt2x convert: pt2x.converters.to_onnx needs 'onnx', which is not installed: pip install 'pt2x[onnx]'")
    assert not dst.exists()


def test_api_without_onnx():
    r = _run_without(["onnx"], """
from pt2x.serde.errors import MissingExtraError, Pt2Error
try:
    from pt2x.converters import to_onnx
except ImportError as e:  # what callers written for a plain ImportError catch
    assert isinstance(e, MissingExtraError) and isinstance(e, Pt2Error), type(e)
    assert e.name == "onnx" and e.extra == "onnx"
    print(e)
""")
    assert r.returncode == 0, r.stderr
    assert "pip install 'pt2x[onnx]'" in r.stdout


def test_api_without_torch(tmp_path):
    dst = tmp_path / "m.pt2"
    r = _run_without(["torch"], """
import pt2x.serde
from pt2x.serde.errors import MissingExtraError
for call in (lambda: pt2x.serde.save(object(), sys.argv[1]),
             lambda: pt2x.serde.load_exported_program(sys.argv[2]),
             lambda: pt2x.serde.to_schema(object())):
    try:
        call()
    except ImportError as e:
        assert isinstance(e, MissingExtraError), type(e)
        print(e)
""", str(dst), MLP)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"pt2x.serde.{f} needs 'torch', which is not installed: pip install 'pt2x[torch]'"
        for f in ("save", "load_exported_program", "to_schema")
    ]
    assert not dst.exists()


def test_tflite_convert_writes_a_tfl3_flatbuffer(capsys, tmp_path):
    """``convert --to tflite`` writes a TFL3 flatbuffer (the file identifier at bytes 4-8) and
    ``to_tflite`` returns the same bytes; an unusable output path still fails before any work."""
    from pt2x.converters import to_tflite

    dst = tmp_path / "o.tflite"
    rc, out, err = _cli(capsys, *_convert("tflite", [], MLP, str(dst)))
    assert rc == 0, err
    data = dst.read_bytes()
    assert data[4:8] == b"TFL3"
    assert to_tflite(MLP) == data
    rc, _, err = _cli(capsys, *_convert("tflite", [], MLP, str(tmp_path / "missing" / "o.tflite")))
    assert rc == 2 and "missing" in _one_line(err)


def test_tflite_without_its_extra(tmp_path):
    """Without flatbuffers the answer is still a one-line pt2x error, never a traceback."""
    r = _run_without(["flatbuffers", "ai_edge_litert"], _CLI, *_convert("tflite", [], MLP, str(tmp_path / "o.tflite")))
    assert r.returncode == 2, r.stderr
    line = _one_line(r.stderr)
    assert "pip install 'pt2x[tflite]'" in line


def test_missing_extra_error_is_both():
    e = MissingExtraError("pt2x.serde.save", "torch", "torch")
    assert isinstance(e, ImportError) and isinstance(e, Pt2UsageError) and isinstance(e, Pt2Error)
    assert e.name == "torch" and "pip install 'pt2x[torch]'" in str(e)
    import pickle

    assert str(pickle.loads(pickle.dumps(e))) == str(e)


# ------------------------------------------------------------------ inspect: invalid expressions

_MARKER_CODE = "(__import__('pathlib').Path({marker!r}).touch(), s77)[1]"


def _with_expression(src: str, dst, text: str) -> str:
    """Copy ``src`` with every symbolic size of the model JSON replaced by ``text``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("models/model.json"):
                obj = json.loads(data)
                for meta in obj["graph_module"]["graph"]["tensor_values"].values():
                    for size in meta["sizes"]:
                        if "as_expr" in size:
                            size["as_expr"]["expr_str"] = text
                data = json.dumps(obj).encode()
            zout.writestr(info.filename, data)
    return str(dst)


def test_inspect_marks_code_as_invalid(tmp_path):
    marker = tmp_path / "ran"
    path = _with_expression(MLP, tmp_path / "evil.pt2", _MARKER_CODE.format(marker=str(marker)))

    r = run_cli_torch_free("inspect", "--json", path)
    assert r.returncode == 1, r.stderr
    model = json.loads(r.stdout)["models"]["model"]
    x = next(e for e in model["inputs"] if e["kind"] == "user_input")
    bad, eight = x["shape"]
    assert eight == 8
    assert bad["invalid"].startswith("(__import__(") and "not allowed" in bad["error"]
    assert len(model["invalid_expressions"]) == 4  # x, linear, relu, linear_1
    first = model["invalid_expressions"][0]
    assert first["member"].endswith("models/model.json")
    assert first["path"] == "graph_module.graph.tensor_values['x'].sizes[0]"
    assert model["range_constraints"] == {"s77": [1, 64]}  # other keys unchanged

    r = run_cli_torch_free("inspect", path)
    assert r.returncode == 1, r.stderr
    assert "user_input       x float[<invalid>, 8]" in r.stdout
    assert "invalid shape expression: graph_module.graph.tensor_values['x'].sizes[0]: " in r.stdout
    assert r.stdout.rstrip().splitlines()[-1].startswith("INVALID: 4 shape expression(s)")

    r = run_cli_torch_free("validate", path)
    assert r.returncode == 1 and "bad-expression" in r.stdout
    assert not marker.exists()


def test_inspect_shows_control_characters_escaped(capsys, tmp_path):
    path = _with_expression(MLP, tmp_path / "esc.pt2", "s77\x1b[2J" + "+" * 500)
    rc, out, _ = _cli(capsys, "inspect", path)
    assert rc == 1
    assert "\x1b" not in out and "\\x1b[2J" in out
    assert max(len(line) for line in out.splitlines()) < 400


def test_inspect_valid_file_exits_0(capsys):
    rc, out, _ = _cli(capsys, "inspect", "--json", MLP)
    model = json.loads(out)["models"]["model"]
    assert rc == 0 and model["invalid_expressions"] == []
    assert next(e for e in model["inputs"] if e["kind"] == "user_input")["shape"] == ["s77", 8]


# ------------------------------------------------------------------ file modes


@pytest.fixture
def umask():
    """Set the process umask for one test, restoring it after."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o027], ids=oct)
def test_written_files_honour_umask(capsys, tmp_path, umask, mask):
    umask(mask)
    want = 0o666 & ~mask
    for to, extra in WRITERS[:2]:
        dst = tmp_path / f"out.{to}"
        rc, _, err = _cli(capsys, *_convert(to, extra, MLP, str(dst)))
        assert rc == 0, err
        assert _mode(dst) == want, (to, oct(_mode(dst)))


@pytest.mark.parametrize("mask", [0o022, 0o027], ids=oct)
def test_save_honours_umask(tmp_path, umask, mask):
    pytest.importorskip("torch")
    import pt2x.serde
    import zoo

    umask(mask)
    dst = tmp_path / "m.pt2"
    pt2x.serde.save(zoo.exported("mlp_dynamic"), dst)
    assert _mode(dst) == 0o666 & ~mask
    dst.chmod(0o600)  # replacing a file keeps its mode, as open(path, "wb") would
    pt2x.serde.save(zoo.exported("mlp_dynamic"), dst)
    assert _mode(dst) == 0o600


# ------------------------------------------------------------------ entry points, internal errors


@pytest.mark.parametrize("module", ["pt2x", "pt2x.tools"])
def test_python_dash_m(module):
    r = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: pt2x ")
    r = subprocess.run([sys.executable, "-m", module, "inspect", "/nonexistent.pt2"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and _one_line(r.stderr) == "pt2x inspect: cannot read /nonexistent.pt2: no such file or directory"


def test_internal_error_keeps_its_traceback(capsys, monkeypatch):
    """A bug in pt2x (here: the summary raising) is not passed off as a user error."""
    import pt2x.tools.cmd_inspect as cmd

    def broken(archive):
        raise KeyError("a bug")

    monkeypatch.setattr(cmd, "archive_summary", broken)
    rc, _, err = _cli(capsys, "inspect", MLP)
    assert rc == 3
    assert "Traceback" in err and "KeyError: 'a bug'" in err
    assert err.rstrip().splitlines()[-1] == "pt2x inspect: internal error: this is a bug in pt2x; please report it with the traceback above"


def _with_node_target(src: str, dst, target: str) -> None:
    """Copy ``src`` with the first node's target replaced in its model JSON."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("models/model.json"):
                doc = json.loads(data)
                doc["graph_module"]["graph"]["nodes"][0]["target"] = target
                data = json.dumps(doc).encode()
            zout.writestr(info, data)


@pytest.mark.parametrize("target", ["torch.ops.aten.\x1b[2J\x1b]0;owned\x07relu.default", "torch.ops.aten.\ud800.default"],
                         ids=["terminal-escapes", "lone-surrogate"])
@pytest.mark.parametrize("command", ["inspect", "validate"])
def test_text_output_escapes_what_a_file_holds(capsys, tmp_path, target, command):
    """Names from the file reach the terminal escaped: no control sequence, no encoding error."""
    path = tmp_path / "names.pt2"
    _with_node_target(MLP, path, target)
    rc, out, err = _cli(capsys, command, str(path))
    assert rc in (0, 1), err
    text = out + err
    assert "\x1b" not in text and "\x07" not in text and "\ud800" not in text
    if command == "inspect":
        assert ("\\x1b[2J" in text) or ("\\ud800" in text)
