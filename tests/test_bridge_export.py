"""pt2x's writer (serde.bridge.save / bridge_export / package) against torch.export.save.

For every zoo program, as exported and after run_decompositions():
  * models/model.json equals torch's (compared in the canonical form below — which
    drops nothing; see docs/serde.md "Canonical form");
  * every other member is byte-identical, except .data/serialization_id (torch's is
    derived from its own hashing; ours from a sha256 of the content);
  * torch.export.load of pt2x's file reproduces the program's outputs bit-for-bit on
    the example inputs and, where dynamic, on the second input set.
Plus programs the zoo lacks (auto_functionalized, wrap_with_set_grad_enabled,
preserve_module_call_signature, effect tokens, sym floats, derived dims, dtype/device/
layout/memory-format arguments, complex scalars, opaque and torchbind custom objects), several
models in one archive with extra files, determinism, atomicity, and the torch-free
packaging layer.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import zipfile

import pytest
import torch
from torch.export import Dim

import zoo
from torchfree import run_torch_free

from pt2x.schema import definitions as d
from pt2x.serde import bridge, json_codec
from pt2x.serde import bridge_export as bx

SERIALIZATION_ID = ".data/serialization_id"


def canonical(model_json: bytes):
    """The canonical form both writers' model JSON is compared in: the parsed JSON.

    Nothing is dropped or renamed: pt2x writes torch's node names, value names, field
    order and metadata strings, so the parsed documents must be equal as they are.
    """
    return json.loads(model_json)


def members(blob: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        return {n.split("/", 1)[1]: z.read(n) for n in z.namelist()}


def torch_save_bytes(ep) -> bytes:
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    return buf.getvalue()


def pt2x_save_bytes(ep, **kw) -> bytes:
    buf = io.BytesIO()
    bridge.save(ep, buf, **kw)
    return buf.getvalue()


def assert_same_archive(torch_blob: bytes, ours: bytes):
    a, b = members(torch_blob), members(ours)
    assert list(a) == list(b), "member names or order differ"
    assert canonical(b["models/model.json"]) == canonical(a["models/model.json"])
    for k in a:
        if k == SERIALIZATION_ID:
            assert len(b[k]) == 40 and b[k].isdigit()
            continue
        assert b[k] == a[k], f"member {k} differs"
    # weights: same bytes per FQN (also implied by the byte equality above)
    for cfg_name, folder in (("data/weights/model_weights_config.json", "data/weights/"),
                             ("data/constants/model_constants_config.json", "data/constants/")):
        ca, cb = json.loads(a[cfg_name])["config"], json.loads(b[cfg_name])["config"]
        assert ca == cb
        for fqn, meta in ca.items():
            assert b[folder + cb[fqn]["path_name"]] == a[folder + meta["path_name"]], fqn


# ------------------------------------------------------------- extra programs


@torch.library.custom_op("pt2x_export_test::inplace_scale", mutates_args=("x",))
def inplace_scale(x: torch.Tensor, s: float) -> None:
    x.mul_(s)


@inplace_scale.register_fake
def _(x, s):
    return None


@torch.library.custom_op("pt2x_export_test::record", mutates_args=())
def record(x: torch.Tensor) -> None:
    pass


@record.register_fake
def _(x):
    return None


def _register_effects():
    from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

    _register_effectful_op(torch.ops.pt2x_export_test.record.default, _EffectType.ORDERED)


_register_effects()


class AutoFunc(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.ones(3))

    def forward(self, x):
        torch.ops.pt2x_export_test.inplace_scale(self.state, 2.0)
        return x + self.state


class GradMode(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            y = self.lin(x)
        return y * 2


class Sub(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class Preserve(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = Sub()

    def forward(self, x):
        return self.sub(x).relu()


class TorchObjArgs(torch.nn.Module):
    def forward(self, x):
        a = torch.zeros(2, 3, dtype=torch.float64, device="cpu", layout=torch.strided)
        b = x.contiguous(memory_format=torch.channels_last)
        c = torch.empty_like(x, memory_format=torch.preserve_format).fill_(1.0)
        parts = torch.split(x, 1, dim=1)
        return a.sum() + b.sum() + c.sum() + parts[0].sum() + parts[-1].mean(), x[:, None, torch.tensor([0, 1])]


class SymFloatOps(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        return x * (n / 2), torch.full((2,), n * 0.5), x.new_zeros(n // 2 + 1)


class DerivedDims(torch.nn.Module):
    def forward(self, x, y):
        return x[:, : y.shape[1]] + y, torch.cat([x, x], 0)


class ComplexScalar(torch.nn.Module):
    def forward(self, x):
        return torch.view_as_real(torch.view_as_complex(x) * (1 + 2j))


class Effects(torch.nn.Module):
    def forward(self, x):
        torch.ops.pt2x_export_test.record(x)
        y = x * 2
        torch.ops.pt2x_export_test.record(y)
        return y + 1


from torch._library.opaque_object import register_opaque_type  # noqa: E402
from torch._opaque_base import OpaqueBase  # noqa: E402


class Scale(OpaqueBase):
    """An opaque (plain-pickle) custom object: a CUSTOM_OBJ input, stored as opaque_obj_<i>."""

    def __init__(self, k):
        self.k = k


register_opaque_type(Scale, typ="reference")


@torch.library.custom_op("pt2x_export_test::apply_scale", mutates_args=())
def apply_scale(x: torch.Tensor, s: Scale) -> torch.Tensor:
    return x * s.k


@apply_scale.register_fake
def _(x, s):
    return torch.empty_like(x)


class OpaqueObj(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.s = Scale(3.0)

    def forward(self, x):
        return torch.ops.pt2x_export_test.apply_scale(x, self.s) + 1


@functools.cache
def _torchbind_loaded() -> bool:
    """torch's torchbind test classes (libtorchbind_test.so ships in the wheel), with fakes."""
    lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorchbind_test.so")
    if not os.path.exists(lib):
        return False
    from torch.testing._internal import torchbind_impls

    torch.ops.load_library(lib)
    torchbind_impls.register_fake_operators()
    torchbind_impls.register_fake_classes()
    return True


class TorchBind(torch.nn.Module):
    """A ScriptObject attribute: CUSTOM_OBJ input, custom op + call_torchbind, custom_obj_0."""

    def __init__(self):
        super().__init__()
        self.attr = torch.classes._TorchScriptTesting._Foo(10, 20)

    def forward(self, x):
        return x + torch.ops._TorchScriptTesting.takes_foo(self.attr, x) + self.attr.add_tensor(x)


def _torchbind_module():
    if not _torchbind_loaded():
        pytest.skip("libtorchbind_test.so not in this torch build")
    return TorchBind()


def _extra_cases():
    dx = Dim("dx", min=2, max=32)
    b = Dim("b", max=16)
    return {
        # name: (module, args, export options, second args)
        "auto_functionalized": (AutoFunc, (torch.randn(3),), {}, None),
        "grad_mode": (GradMode, (torch.randn(2, 4),), {}, None),
        "preserve_signature": (Preserve, (torch.randn(2, 4),), {"preserve_module_call_signature": ("sub",)}, None),
        "torch_object_args": (TorchObjArgs, (torch.randn(1, 3, 4, 4),), {}, None),
        "sym_float": (SymFloatOps, (torch.randn(6, 3),), {"dynamic_shapes": ({0: Dim("n", min=2, max=64)},)},
                      (torch.randn(9, 3),)),
        "derived_dims": (DerivedDims, (torch.randn(4, 8), torch.randn(4, 4)),
                         {"dynamic_shapes": ({0: b, 1: 2 * dx}, {0: b, 1: dx})},
                         (torch.randn(5, 6), torch.randn(5, 3))),
        "complex_scalar": (ComplexScalar, (torch.randn(3, 2),), {}, None),
        "tokens": (Effects, (torch.randn(3),), {}, None),
        "opaque_custom_obj": (OpaqueObj, (torch.randn(3),), {}, None),
        "torchbind": (_torchbind_module, (torch.randn(2, 3),), {"strict": False}, None),
    }


EXTRA = _extra_cases()


@functools.cache
def extra_exported(name: str, decomposed: bool):
    if decomposed:
        return extra_exported(name, False).run_decompositions()
    make, args, opts, _ = EXTRA[name]
    torch.manual_seed(0)
    return torch.export.export(make().eval(), args, **opts)


# ---------------------------------------------------------------------- programs


def _program(kind: str, name: str, decomposed: bool):
    if kind == "zoo":
        case = zoo.all_cases()[name]
        ep = zoo.exported(name, decomposed)
        inputs = [(case.args(), case.kwargs())]
        if case.second_args is not None:
            inputs.append((case.second_args(), (case.second_kwargs or case.kwargs)()))
        return ep, inputs
    ep = extra_exported(name, decomposed)
    _, args, _, second = EXTRA[name]
    return ep, [(args, {})] + ([(second, {})] if second is not None else [])


PROGRAMS = [("zoo", n, dec) for n in zoo.exportable_names() for dec in (False, True)] + [
    ("extra", n, dec) for n in EXTRA for dec in (False, True)
]
IDS = [f"{n}{'-decomposed' if dec else ''}" for _, n, dec in PROGRAMS]


@functools.cache
def saved(kind: str, name: str, decomposed: bool) -> tuple[bytes, bytes]:
    ep, _ = _program(kind, name, decomposed)
    return torch_save_bytes(ep), pt2x_save_bytes(ep)


@pytest.mark.parametrize("kind,name,decomposed", PROGRAMS, ids=IDS)
def test_archive_equals_torch(kind, name, decomposed):
    torch_blob, ours = saved(kind, name, decomposed)
    assert_same_archive(torch_blob, ours)


def _clone(tree):
    return torch.utils._pytree.tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, tree)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's values as raw bytes (so NaNs and signed zeros compare exactly)."""
    if not t.numel():
        return t
    flat = torch.empty(t.numel(), dtype=t.dtype)
    flat.copy_(t.detach().reshape(-1))
    return flat.view(torch.uint8)


def _assert_bit_equal(a, b):
    fa, sa = torch.utils._pytree.tree_flatten(a)
    fb, sb = torch.utils._pytree.tree_flatten(b)
    assert sa == sb
    for x, y in zip(fa, fb):
        if isinstance(x, torch.Tensor):
            assert isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.shape == y.shape
            assert torch.equal(_bits(x), _bits(y))
        else:
            assert x == y


@pytest.mark.parametrize("kind,name,decomposed", PROGRAMS, ids=IDS)
def test_torch_load_runs_bit_equal(kind, name, decomposed):
    ep, inputs = _program(kind, name, decomposed)
    # saved now, not from the cache: running a program with buffer mutation changes
    # its state (shared with its decomposed twin), and the file must hold the current one
    ours = pt2x_save_bytes(ep)
    loaded = torch.export.load(io.BytesIO(ours))
    for args, kwargs in inputs:
        expected = ep.module()(*_clone(args), **_clone(kwargs))
        got = loaded.module()(*_clone(args), **_clone(kwargs))
        _assert_bit_equal(expected, got)


# ------------------------------------------------------------------ schema object


def test_to_schema_is_schema_program():
    ep = zoo.exported("mlp_dynamic")
    prog = bridge.to_schema(ep)
    assert isinstance(prog, d.ExportedProgram)
    assert (prog.schema_version.major, prog.schema_version.minor) == (8, 20)
    assert list(prog.range_constraints.values()) == [d.RangeConstraint(min_val=1, max_val=64)]
    again = json_codec.loads(d.ExportedProgram, json_codec.dumps(prog), member="model.json")
    assert json_codec.encode(again) == json_codec.encode(prog)


def test_sym_exprs_printed_as_torch():
    prog = bridge.to_schema(zoo.exported("dynamic_reshape"))
    sizes = [s for tm in prog.graph_module.graph.tensor_values.values() for s in tm.sizes if s.type == "as_expr"]
    # sympy.srepr form, e.g. "Symbol('s17', positive=True, integer=True)", "Add(Symbol(...), Integer(4))"
    assert sizes and all(re.fullmatch(r"[A-Z]\w*\(.*\)", s.value.expr_str) for s in sizes)
    assert any(s.value.expr_str.startswith("Add(") for s in sizes)
    assert all(s.value.hint is not None for s in sizes)


# ------------------------------------------------------- several models, extra files


def test_several_models_and_extra_files():
    from torch.export.pt2_archive._package import package_pt2

    eps = {"mlp": zoo.exported("mlp_dynamic"), "tied": zoo.exported("tied_weights"),
           "const": zoo.exported("lifted_constant", True)}
    extra = {"notes.txt": "hello", "meta/info.json": '{"a": 1}'}
    buf = io.BytesIO()
    package_pt2(buf, exported_programs=eps, extra_files=extra)
    ours = io.BytesIO()
    bridge.save(eps, ours, extra_files=extra)
    a, b = members(buf.getvalue()), members(ours.getvalue())
    assert list(a) == list(b)
    for k in a:
        if k != SERIALIZATION_ID:
            assert a[k] == b[k], k


# ---------------------------------------------------------- determinism, atomicity


def test_deterministic_and_atomic(tmp_path, monkeypatch):
    ep = zoo.exported("conv_bn_pool")
    p1, p2 = tmp_path / "a.pt2", tmp_path / "b.pt2"
    bridge.save(ep, p1)
    bridge.save(ep, p2)
    one, two = p1.read_bytes(), p2.read_bytes()
    # same content, same bytes; the archive root is the file stem, as torch writes it
    assert members(one) == members(two)
    bridge.save(ep, p2.with_name("a.pt2"))
    assert p1.read_bytes() == one
    other = members(pt2x_save_bytes(zoo.exported("mlp_dynamic")))[SERIALIZATION_ID]
    assert other != members(one)[SERIALIZATION_ID]

    calls = []

    def failing(t):
        calls.append(t)
        if len(calls) == 3:
            raise RuntimeError("storage unreadable")
        return bx_storage(t)

    bx_storage = bx._storage_bytes
    monkeypatch.setattr(bx, "_storage_bytes", failing)
    with pytest.raises(RuntimeError, match="storage unreadable"):
        bridge.save(ep, p1)
    assert p1.read_bytes() == one  # previous file intact
    assert sorted(os.listdir(tmp_path)) == ["a.pt2", "b.pt2"]  # no temporary left behind


def test_file_object_root_and_torch_root(tmp_path):
    ep = zoo.exported("tied_weights")
    path = tmp_path / "my_model.pt2"
    bridge.save(ep, path)
    with zipfile.ZipFile(path) as z:
        assert all(n.startswith("my_model/") for n in z.namelist())
    assert torch.export.load(str(path)).module()(torch.zeros(2, 5, dtype=torch.long)).shape == (2, 5, 20)


def test_rejects_bad_input():
    from pt2x.serde.errors import Pt2UsageError

    with pytest.raises(Pt2UsageError):
        bridge.save(object(), io.BytesIO())
    with pytest.raises(Pt2UsageError):
        bridge.save({"a/b": zoo.exported("tied_weights")}, io.BytesIO())


def test_target_schema_downgrade():
    from pt2x.serde import compat

    if not hasattr(compat, "downgrade"):
        pytest.skip("serde.compat.downgrade not written yet")
    ours = pt2x_save_bytes(zoo.exported("mlp_dynamic"), target_schema=(8, 15))
    prog = json.loads(members(ours)["models/model.json"])
    assert (prog["schema_version"]["major"], prog["schema_version"]["minor"]) == (8, 15)


# ------------------------------------------------------------ torch-free packaging


def test_package_is_torch_free_and_dedups_storage():
    proc = run_torch_free(
        """
        import io, json, zipfile
        from pt2x.schema import definitions as d
        from pt2x.serde.package import ModelPayload, Payload, archive_members
        from pt2x.serde.archive_writer import to_bytes
        meta = d.TensorMeta(dtype=d.ScalarType.FLOAT, sizes=[d.SymInt(as_int=2)], requires_grad=False,
                            device=d.Device(type="cpu"), strides=[d.SymInt(as_int=1)],
                            storage_offset=d.SymInt(as_int=0), layout=d.Layout.Strided)
        prog = b'{"fake": "program"}'
        w = [Payload("a", b"12345678", meta, True, "raw", 1), Payload("b", b"12345678", meta, True, "raw", 1),
             Payload("c", lambda: b"abcdefgh", meta, False, "raw", 2)]
        c = [Payload("k", b"x" * 8, meta, False, "raw", 3)]
        blob = to_bytes(archive_members({"m": ModelPayload(prog, w, c, b"")}, {"x.txt": "hi"}))
        z = zipfile.ZipFile(io.BytesIO(blob))
        names = [n.split("/", 1)[1] for n in z.namelist()]
        assert names == ["data/weights/weight_0", "data/weights/weight_1", "data/weights/m_weights_config.json",
                         "data/constants/tensor_0", "data/constants/m_constants_config.json", "models/m.json",
                         "data/sample_inputs/m.pt", "extra/x.txt", "archive_format", "archive_version",
                         ".data/version", "byteorder", ".data/serialization_id"], names
        cfg = json.loads(z.read("archive/data/weights/m_weights_config.json"))["config"]
        assert [cfg[k]["path_name"] for k in "abc"] == ["weight_0", "weight_0", "weight_1"]
        assert z.read("archive/data/weights/weight_1") == b"abcdefgh"
        assert z.read("archive/.data/version") == b"6\\n"
        print("ok")
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
