"""AOTInductor packages (``torch._inductor.aoti_compile_and_package``): the same zip layout as
``torch.export.save``'s, but compiled code instead of a program. pt2x says what the file is
(models, platform, device, files) without loading anything, gives it its own verdict
(``aoti-package``: neither valid nor unreadable), and refuses to convert it, naming
``torch.export.save``. The package is a real one torch 2.13 compiled (tests/fixtures/aoti/,
with the script that made it: compiling takes minutes)."""

from __future__ import annotations

import json
import os
import zipfile

import pytest

from pt2x.serde import UnsafeContentError, load
from pt2x.serde.compat.plan import plan_for_target
from pt2x.tools.cli import main
from pt2x.tools.scan.check import check_artifact
from pt2x.tools.scan.options import ScanOptions
from paths import FIXTURES
from torchfree import run_cli_torch_free

AOTI = os.path.join(FIXTURES, "aoti", "linear_cpu.pt2")


def _cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_fixture_is_a_real_package():
    with zipfile.ZipFile(AOTI) as z:
        names = z.namelist()
    assert any(n.endswith(".wrapper.so") for n in names)
    assert any(n.endswith("_metadata.json") for n in names)
    assert not any("/models/" in n for n in names)


def test_load_describes_and_loads_nothing():
    with load(AOTI) as archive:
        assert archive.layout == "aoti-package" and archive.models == {}
        (model,) = archive.aoti_models.values()
        assert model.name == "model"
        assert model.metadata["device"] == "cpu" and model.metadata["platform"] == "linux"
        assert model.metadata["machine"] == "x86_64"
        assert any(f.endswith(".wrapper.so") for f in model.files)
        with pytest.raises(UnsafeContentError, match="AOTInductor package.*torch.export.save"):
            archive.model()


def test_inspect_says_what_it_is(capsys):
    rc, out, _ = _cli(capsys, "inspect", AOTI)
    assert rc == 0
    assert "AOTInductor package" in out and "torch.export.save" in out
    assert "platform linux" in out and "device cpu" in out and ".wrapper.so" in out
    rc, out, _ = _cli(capsys, "inspect", "--json", AOTI)
    s = json.loads(out)
    assert s["kind"] == "aoti-package" and s["models"] == {}
    assert s["aoti_models"]["model"]["device"] == "cpu"
    assert any(f.endswith(".wrapper.so") for f in s["aoti_models"]["model"]["files"])


def test_inspect_is_torch_free():
    r = run_cli_torch_free("inspect", "--json", AOTI)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kind"] == "aoti-package"


@pytest.mark.parametrize("target", [[], ["--target", "torch==2.10"]])
def test_validate_gives_its_own_verdict(capsys, target):
    rc, out, _ = _cli(capsys, "validate", *target, AOTI)
    assert rc == 1
    assert "aoti-package" in out.splitlines()[-2 if target else -1]
    assert "unreadable" not in out and "valid" not in out.replace("INVALID", "").split("[aoti-package]")[-1]
    rc, out, _ = _cli(capsys, "validate", "--json", AOTI)
    r = json.loads(out)
    assert r["kind"] == "aoti-package" and r["readable"] is True and r["valid"] is False
    assert [f["code"] for f in r["findings"]] == ["aoti-package"]


def test_scan_verdict():
    result = check_artifact(AOTI, ScanOptions(target="torch==2.10"))
    assert result["verdict"] == "aoti-package" and result["writable"] is False


@pytest.mark.parametrize("to,extra", [("onnx", []), ("tflite", []), ("pt2", ["--target-schema", "8.15"]),
                                      ("pt2", ["--target-schema", "8.8"])])
def test_convert_refuses(capsys, tmp_path, to, extra):
    out = tmp_path / f"out.{to}"
    rc, stdout, err = _cli(capsys, "convert", AOTI, "--to", to, "-o", out, *extra)
    assert rc in (1, 2) and not out.exists()
    assert "compiled code" in err and "torch.export.save" in err
    assert "Traceback" not in err


def test_planner_never_copies_compiled_code():
    with load(AOTI) as archive:
        plan = plan_for_target(archive, "8.20")
    assert not plan.writable and plan.members == []
    assert "aoti-package" in {f.code for f in plan.blockers}


def test_compiled_code_beside_a_program_is_never_written(tmp_path):
    """A program with AOTInductor members beside it: torch.export.load reads the program, but the
    planner does not pass the compiled code on (``native-code``)."""
    base = os.path.join(FIXTURES, "pt2", "torch-2.13.0", "mlp_dynamic.pt2")
    mixed = tmp_path / "mixed.pt2"
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(mixed, "w") as out:
        for info in src.infolist():
            out.writestr(info.filename, src.read(info))
        out.writestr("mlp_dynamic/data/aotinductor/model/x.wrapper.so", b"\x7fELF" + b"\0" * 60)
    with load(mixed) as archive:
        assert archive.layout == "pt2" and "model" in archive.models
        plan = plan_for_target(archive, "8.20")
    assert not plan.writable and {f.code for f in plan.blockers} == {"native-code"}
