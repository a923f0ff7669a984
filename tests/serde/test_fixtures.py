"""Artifacts written by other torch releases (tests/fixtures/pt2/torch-*/, see its README)."""

from __future__ import annotations

import glob
import json
import os

import pytest

import pt2x.serde as serde
from pt2x.serde.validate import validate_archive
from pt2x.serde.codec.upgrade import UPGRADE_FROM_MAJOR, UPGRADED_VERSION, declared_version
from pt2x.serde.compat.plan import archive_documents
from paths import PT2_FIXTURES

HERE = os.path.join(PT2_FIXTURES)
FILES = sorted(glob.glob(os.path.join(HERE, "torch-*", "*.pt2")))
LAYOUT = {"2.5.1": "flat", "2.6.0": "flat", "2.8.0": "pt2-pickled-weights", "2.10.0": "pt2", "2.13.0": "pt2", "2.14.1": "pt2", "2.15.0": "pt2"}


def _release(path: str) -> str:
    return os.path.basename(os.path.dirname(path)).removeprefix("torch-")


def _id(path: str) -> str:
    return f"{_release(path)}/{os.path.basename(path)[:-4]}"


def test_all_releases_present():
    assert {_release(p) for p in FILES} == set(LAYOUT)
    assert len(FILES) == 63


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_fixture_reads_and_validates(path):
    release = _release(path)
    manifest = json.load(open(os.path.join(os.path.dirname(path), "manifest.json")))
    archive = serde.load(path)
    model = archive.models["model"]
    assert archive.layout == LAYOUT[release]
    ((_, _, doc),) = [x for x in archive_documents(archive) if x[0] == "ExportedProgram"]
    assert list(declared_version(doc)) == manifest["schema"]  # as written; 7.x is read upgraded
    read_as = UPGRADED_VERSION if manifest["schema"][0] == UPGRADE_FROM_MAJOR else tuple(manifest["schema"])
    assert model.schema_version == read_as
    assert model.program.torch_version.startswith(release)
    case = manifest["cases"][os.path.basename(path)[:-4]]
    assert len(model.program.graph_module.graph.nodes) > 0
    # FX also counts placeholders, the output node and getitem nodes (serialized as outputs)
    n_inputs = len(model.program.graph_module.signature.input_specs)
    assert len(model.program.graph_module.graph.nodes) + n_inputs + 1 <= case["nodes"]
    assert [f for f in validate_archive(archive) if f.severity == "error"] == []


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_fixture_weights_match_torch(path):
    """Every weight equals what torch 2.13's own loader gives for the same file, bit for bit."""
    torch = pytest.importorskip("torch")
    from torch_compare import assert_weights_match

    if json.load(open(os.path.join(os.path.dirname(path), "manifest.json")))["schema"][0] != 8:
        # torch 2.13 refuses another major; its torch.load still reads the flat zip's weight pickles
        import io
        import zipfile

        from torch_compare import assert_array_equals_tensor

        model = serde.load(path).models["model"]
        with zipfile.ZipFile(path) as z:
            for member, mine in (("serialized_state_dict.pt", model.state_dict), ("serialized_constants.pt", model.constants)):
                theirs = torch.load(io.BytesIO(z.read(member)), weights_only=True)
                assert set(mine) == set(theirs), member
                for fqn, t in theirs.items():
                    assert_array_equals_tensor(mine[fqn], t, fqn)
        return
    try:
        ep = torch.export.load(path)
    except Exception as e:  # torch's own reader, not pt2x, fails on some older files
        pytest.skip(f"torch {torch.__version__} itself cannot load this {_release(path)} file: {type(e).__name__}: {str(e)[:120]}")
    assert_weights_match(serde.load(path).models["model"], ep)
