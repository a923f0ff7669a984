"""Hostile JSON in .pt2 archives: the reader fails closed, in time linear in the input, and
every error names the archive member (and the field path where there is one).

The archives are the committed fixtures (written by real torch releases) edited with
``zipfile``; nothing here imports torch. Regressions from fuzzing ~29,000 mutated archives:
huge integers (``ValueError`` from ``json``), deep nesting (``RecursionError``), a failing
item deep in nested subgraphs (decode time 4^depth), errors without a member name (the 7.x
upgrade path), and ``Union.__hash__`` re-hashing every level (2^depth).
"""

from __future__ import annotations

import copy
import io
import json
import os
import random
import sys
import textwrap
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pt2x.serde as serde
from pt2x.schema import definitions as d
from pt2x.serde.codec import json_codec
from pt2x.serde import limits
from pt2x.serde.errors import LimitExceededError, Pt2Error, Pt2FormatError, SchemaError, SchemaVersionError
from pt2x.serde.validate import validate_archive
from paths import FIXTURES
from torchfree import run_torch_free

PT2 = os.path.join(FIXTURES, "pt2")
MLP = os.path.join(PT2, "torch-2.13.0", "mlp_dynamic.pt2")
COND = os.path.join(PT2, "torch-2.13.0", "cond.pt2")
FLAT_MLP = os.path.join(PT2, "torch-2.6.0", "mlp_dynamic.pt2")
HOSTILE_TIMEOUT = 60  # seconds for a subprocess that never ends if the old exponential walk is back


# ---------------------------------------------------------------------------- helpers


def members(path: str) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i.filename)) for i in z.infolist()]


def program_member(path: str) -> str:
    return next(n for n, _ in members(path) if n.endswith(("models/model.json", "serialized_exported_program.json")))


def rezip(items) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, body in items:
            z.writestr(name, body)
    return buf.getvalue()


def edit_text(path: str, member: str, fn) -> bytes:
    """The archive at ``path`` with ``member``'s bytes replaced by ``fn(old_bytes)``."""
    return rezip([(n, fn(b) if n == member else b) for n, b in members(path)])


def edit_json(path: str, fn, *, member: str | None = None, raw=None) -> bytes:
    """The archive with a JSON member edited as a dict by ``fn(doc)``; ``raw`` then edits its text."""
    member = member or program_member(path)

    def change(body: bytes) -> bytes:
        doc = json.loads(body)
        fn(doc)
        text = json.dumps(doc)
        return (raw(text) if raw else text).encode()

    return edit_text(path, member, change)


def load_error(data: bytes, exc=Pt2FormatError) -> Pt2FormatError:
    with pytest.raises(exc) as info:
        serde.load(data)
    return info.value


def assert_names_member(err: Pt2FormatError, data: bytes) -> None:
    """The error names a member of this archive (non-empty), and its message starts with it."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = z.namelist()
    assert err.member and err.member in names, (err.member, str(err))
    assert str(err).startswith(err.member + ": ")


def first_node_arg(doc: dict) -> dict:
    return doc["graph_module"]["graph"]["nodes"][0]["inputs"][0]


def nested_subgraphs(depth: int, *, bad: bool) -> bytes:
    """cond.pt2 with its true branch nested ``depth`` times inside itself (each copy's only node
    gains an input holding the next copy); with ``bad``, one enum value at the bottom is a string."""

    def nest(doc):
        node = next(n for n in doc["graph_module"]["graph"]["nodes"] if n["target"].endswith("cond"))
        branch = copy.deepcopy(node["inputs"][1])
        cur = node["inputs"][1]
        for _ in range(depth):
            inner = copy.deepcopy(branch)
            cur["arg"]["as_graph"]["graph"]["nodes"][0]["inputs"].append(inner)
            cur = inner
        if bad:
            cur["arg"]["as_graph"]["graph"]["nodes"][0]["inputs"][0]["kind"] = "bad"

    return edit_json(COND, nest)


# ------------------------------------------------------------------------ huge numbers


@pytest.mark.parametrize("digits", [limits.MAX_JSON_NUMBER_DIGITS + 1, 4301, 100_000])
def test_huge_int_in_program(digits):
    def mark(doc):
        doc["graph_module"]["graph"]["tensor_values"]["x"]["sizes"][1] = {"as_int": "HUGE"}

    data = edit_json(MLP, mark, raw=lambda t: t.replace('"HUGE"', "7" * digits))
    e = load_error(data, LimitExceededError)
    assert f"{digits} digits" in str(e) and "MAX_JSON_NUMBER_DIGITS" in str(e)
    assert_names_member(e, data)


def test_huge_int_in_weights_config():
    member = next(n for n, _ in members(MLP) if n.endswith("model_weights_config.json"))

    def mark(doc):
        doc["config"]["fc1.weight"]["tensor_meta"]["sizes"][0] = {"as_int": "HUGE"}

    data = edit_json(MLP, mark, member=member, raw=lambda t: t.replace('"HUGE"', "-" + "9" * 5000))
    e = load_error(data, LimitExceededError)
    assert e.member == member and "5000 digits" in str(e)


def test_huge_float_in_flat_archive():
    def mark(doc):
        doc["graph_module"]["graph"]["nodes"][0]["inputs"][0]["arg"] = {"as_float": "HUGE"}

    data = edit_json(FLAT_MLP, mark, raw=lambda t: t.replace('"HUGE"', "1." + "0" * 300 + "1e5"))
    e = load_error(data, LimitExceededError)
    assert e.member == "serialized_exported_program.json" and "digits" in str(e)


def test_long_digit_runs_in_strings_are_text():
    """Digits inside a string are not a number: a 500-digit node name loads."""
    name = "1" * 500

    def rename(doc):
        doc["graph_module"]["graph"]["nodes"][0]["metadata"]["stack_trace"] = name + ' "quoted" \\' + name

    with serde.load(edit_json(MLP, rename)) as a:
        assert a.model().program.graph_module.graph.nodes[0].metadata["stack_trace"].startswith(name)


def test_huge_int_refused_when_python_allows_any_digits():
    """Torch-free, and independent of ``sys.set_int_max_str_digits``: a million digits are
    refused by the scan before ``int()`` would spend seconds on them."""
    data = edit_json(MLP, lambda doc: first_node_arg(doc).update(arg={"as_int": "HUGE"}),
                     raw=lambda t: t.replace('"HUGE"', "9" * 1_000_000))
    proc = run_torch_free(
        """
        import sys, time
        sys.set_int_max_str_digits(0)
        import pt2x.serde as serde
        from pt2x.serde.errors import LimitExceededError
        t = time.perf_counter()
        try:
            serde.load(open(sys.argv[1], "rb").read())
        except LimitExceededError as e:
            print("refused", e.member, round(time.perf_counter() - t, 3))
        """,
        _write_tmp(data),
        timeout=HOSTILE_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("refused mlp_dynamic/models/model.json"), proc.stdout


def _write_tmp(data: bytes) -> str:
    import tempfile

    f = tempfile.NamedTemporaryFile(suffix=".pt2", delete=False)
    f.write(data)
    f.close()
    return f.name


# ------------------------------------------------------------------------ deep nesting


def test_depth_limit_is_exact():
    """An unknown field at the top level nests ``k`` lists: depth 1 + k. The limit allows exactly
    MAX_JSON_DEPTH and the error names the byte where it is passed."""
    ok = limits.MAX_JSON_DEPTH - 1
    data = edit_json(MLP, lambda doc: doc.update(future="NEST"), raw=lambda t: t.replace('"NEST"', "[" * ok + "]" * ok))
    with serde.load(data) as a:
        assert a.model().unknown_fields == ["ExportedProgram.future"]
    data = edit_json(MLP, lambda doc: doc.update(future="NEST"), raw=lambda t: t.replace('"NEST"', "[" * (ok + 1) + "]" * (ok + 1)))
    e = load_error(data, LimitExceededError)
    assert "MAX_JSON_DEPTH" in str(e)
    assert_names_member(e, data)
    text = dict(members_of(data))[e.member]
    at = int(str(e).rsplit("byte ", 1)[1].rstrip(")"))
    run = text.index(b'"future": [') + len(b'"future": ')  # its k-th bracket opens level 1 + k
    assert at == run + limits.MAX_JSON_DEPTH - 1


def members_of(data: bytes):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(n, z.read(n)) for n in z.namelist()]


def test_brackets_in_strings_do_not_count_but_escapes_cannot_hide_nesting():
    deep = "[" * 1000

    def names(doc):
        doc["graph_module"]["graph"]["nodes"][0]["metadata"]["stack_trace"] = deep + '\\"' + "]" * 1000

    serde.load(edit_json(MLP, names)).close()

    # A string ending in an escaped backslash (\\") closes there: the nesting after it counts.
    def hide(doc):
        doc["graph_module"]["graph"]["nodes"][0]["metadata"]["stack_trace"] = "x\\"
        doc["future"] = "NEST"

    data = edit_json(MLP, hide, raw=lambda t: t.replace('"NEST"', "[" * 500 + "]" * 500))
    assert '\\\\"' in dict(members_of(data))[program_member(MLP)].decode()
    e = load_error(data, LimitExceededError)
    assert "MAX_JSON_DEPTH" in str(e)


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_deep_nesting_with_a_huge_recursion_limit(opener):
    """Torch-free: depth is checked before ``json`` recurses, so a program that raised its
    recursion limit gets a LimitExceededError, not a crash of the C stack."""
    closer = "]" if opener == "[" else "}"
    data = edit_json(MLP, lambda doc: doc.update(future="NEST"),
                     raw=lambda t: t.replace('"NEST"', opener * 300_000 + "1" + closer * 300_000))
    proc = run_torch_free(
        """
        import sys
        sys.setrecursionlimit(10**7)
        import pt2x.serde as serde
        from pt2x.serde.errors import LimitExceededError
        try:
            serde.load(sys.argv[1])
        except LimitExceededError as e:
            print(type(e).__name__, e.member)
        """,
        _write_tmp(data),
        timeout=HOSTILE_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["LimitExceededError", "mlp_dynamic/models/model.json"]


def test_deep_arguments_past_the_limit():
    def nest(doc):
        arg = {"as_int": 1}
        for _ in range(limits.MAX_JSON_DEPTH):
            arg = {"as_string_to_argument": {"k": arg}}
        first_node_arg(doc)["arg"] = arg

    data = edit_json(MLP, nest)
    e = load_error(data, LimitExceededError)
    assert_names_member(e, data)


def test_nested_subgraphs_up_to_the_limit_load_and_validate():
    data = nested_subgraphs(limits.MAX_SUBGRAPH_DEPTH - 1, bad=False)  # the branch itself is level 1
    with serde.load(data) as a:
        graph, depth = a.model().program.graph_module.graph, 0
        while True:
            subs = [i.arg.value for n in graph.nodes for i in n.inputs if i.arg.type == "as_graph"]
            if not subs:
                break
            graph, depth = subs[0].graph, depth + 1
        assert depth == limits.MAX_SUBGRAPH_DEPTH
        validate_archive(a)
        hash(a.model().program.graph_module.graph.nodes[2].inputs[1].arg)  # linear, see below
        repr(a.model().program)


def test_nested_subgraphs_past_the_limit():
    data = nested_subgraphs(limits.MAX_SUBGRAPH_DEPTH, bad=False)
    e = load_error(data, LimitExceededError)
    assert "MAX_SUBGRAPH_DEPTH" in str(e)
    assert_names_member(e, data)
    assert e.path.startswith("graph_module.graph.nodes[2].inputs[1].arg.as_graph.graph.nodes[0].inputs[1].arg.as_graph")


# --------------------------------------------------------------- linear time on failure


def test_failing_item_in_nested_subgraphs_is_found_in_one_pass():
    """The path to a bad value at the bottom of the deepest allowed subgraph nesting, found
    while decoding once. The old decoder re-decoded list items to find the failing one at
    every level (4^depth: 4^15 decodes here); run in a subprocess with a timeout."""
    data = nested_subgraphs(limits.MAX_SUBGRAPH_DEPTH - 1, bad=True)
    proc = run_torch_free(
        """
        import sys
        import pt2x.serde as serde
        from pt2x.serde.errors import SchemaError
        try:
            serde.load(sys.argv[1])
        except SchemaError as e:
            print(e.member)
            print(e.path)
        """,
        _write_tmp(data),
        timeout=HOSTILE_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    member, path = proc.stdout.split()
    level = ".arg.as_graph.graph.nodes[0].inputs[1]"
    assert member == "cond/models/model.json"
    assert path == ("graph_module.graph.nodes[2].inputs[1]" + level * (limits.MAX_SUBGRAPH_DEPTH - 1)
                    + ".arg.as_graph.graph.nodes[0].inputs[0].kind")


def _decoder_calls(doc) -> int:
    """Python function calls made while decoding ``doc`` (counted by a profile hook)."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    try:
        json_codec.decode(d.ExportedProgram, doc, member="m")
    except SchemaError:
        pass
    finally:
        sys.setprofile(None)
    return calls


def test_failure_costs_no_more_than_success():
    """Counted, not timed: decoding a program whose last, deepest value is bad takes no more
    calls than decoding the same program intact (the old decoder took ~4^6 times as many)."""
    good = json.loads(dict(members_of(nested_subgraphs(6, bad=False)))["cond/models/model.json"])
    bad = json.loads(dict(members_of(nested_subgraphs(6, bad=True)))["cond/models/model.json"])
    assert _decoder_calls(bad) <= _decoder_calls(good)


def test_union_hash_is_linear():
    """``hash`` of an Argument nested 60 deep: the old hash re-hashed each level twice (2^60)."""
    proc = run_torch_free(
        """
        from pt2x.schema import definitions as d
        arg = d.Argument(as_tensor=d.TensorArgument(name="x"))
        for _ in range(60):
            arg = d.Argument(as_string_to_argument={"k": arg})
        hash(arg)
        print("ok")
        """,
        timeout=HOSTILE_TIMEOUT,
    )
    assert proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_union_hash_agrees_with_equality():
    a = d.Argument(as_tensors=[d.TensorArgument(name="x"), d.TensorArgument(name="y")])
    b = d.Argument(as_tensors=[d.TensorArgument(name="x"), d.TensorArgument(name="y")])
    c = d.Argument(as_tensors=[d.TensorArgument(name="x"), d.TensorArgument(name="z")])
    assert a == b and hash(a) == hash(b) and len({a, b, c}) == 2


# ------------------------------------------------------------------------- other limits


def test_long_string(monkeypatch):
    monkeypatch.setattr(json_codec, "MAX_JSON_STRING_BYTES", 1000)

    def name(doc):
        doc["graph_module"]["graph"]["nodes"][0]["metadata"]["stack_trace"] = "s" * 1001

    data = edit_json(MLP, name)
    e = load_error(data, LimitExceededError)
    assert "1001 bytes" in str(e) and "MAX_JSON_STRING_BYTES" in str(e)
    assert_names_member(e, data)


@pytest.mark.parametrize(
    "limit, value, path",
    [
        ("MAX_JSON_ITEMS", 4, "graph_module.graph.inputs"),  # 5 inputs
        ("MAX_GRAPH_NODES", 2, "graph_module.graph.nodes"),  # 3 nodes
        ("MAX_GRAPH_VALUES", 7, "graph_module.graph"),  # 8 tensor values
    ],
)
def test_counts(monkeypatch, limit, value, path):
    monkeypatch.setattr(json_codec, limit, value)
    data = open(MLP, "rb").read()
    e = load_error(data, LimitExceededError)
    assert limit in str(e) and e.path == path
    assert_names_member(e, data)


# ----------------------------------------------------------------- every error names its member


def _seven(doc: dict) -> None:
    doc["schema_version"] = {"major": 7, "minor": 3}


HOSTILE_EDITS = {
    "bad-union": lambda doc: first_node_arg(doc).update(arg={"as_int": 1, "as_float": 2.0}),
    "unknown-member": lambda doc: first_node_arg(doc).update(arg={"as_pickle": "x" * 10_000}),
    "wrong-type": lambda doc: first_node_arg(doc).update(kind="one"),
    "missing-field": lambda doc: doc["graph_module"].pop("signature"),
    "list-not-object": lambda doc: doc["graph_module"]["graph"].update(nodes=[[1, 2]]),
    "7x-not-mechanical": lambda doc: _seven(doc),
    "7x-unknown-minor": lambda doc: doc.update(schema_version={"major": 7, "minor": 99}),
    "7x-bad-union": lambda doc: (_seven(doc), first_node_arg(doc).update(arg={"as_int": 1, "as_float": 2.0})),
    "7x-huge-torch-version": lambda doc: (doc.update(torch_version=[[["x" * 5000]]], schema_version={"major": 7, "minor": 9})),
    "newer-major": lambda doc: doc.update(schema_version={"major": 9, "minor": "x" * 5000}),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_EDITS))
@pytest.mark.parametrize("fixture", [MLP, FLAT_MLP])
def test_error_names_member_and_path(case, fixture):
    data = edit_json(fixture, HOSTILE_EDITS[case])
    e = load_error(data)
    assert_names_member(e, data)
    assert e.path, str(e)
    assert len(str(e)) < 2000  # values from the file are cut in messages
    if case.startswith("7x"):
        assert isinstance(e, SchemaVersionError)


def test_duplicate_key_in_7x_program_names_member():
    data = edit_json(MLP, _seven, raw=lambda t: t.replace('"graph_module": {', '"graph_module": {"x": 1, "x": 2, ', 1))
    e = load_error(data, SchemaError)
    assert_names_member(e, data)
    assert e.path == "graph_module" and "duplicate JSON key 'x'" in str(e)


def test_duplicate_key_inside_an_unknown_field_names_its_path():
    data = edit_json(MLP, lambda doc: doc.update(future="X"), raw=lambda t: t.replace('"X"', '{"a": [1, {"b": 1, "b": 2}]}'))
    e = load_error(data, SchemaError)
    assert_names_member(e, data)
    assert e.path == "future.a[1]" and "duplicate JSON key 'b'" in str(e)


def test_empty_member_name_is_named_by_its_entry():
    """A zip entry with an empty name: the error names the archive and the entry's index."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, body in members(MLP):
            z.writestr(name, body)
        info = zipfile.ZipInfo("x")
        z.writestr(info, b"x")
        info.filename = ""  # written to the central directory as an empty name
    e = load_error(buf.getvalue())
    assert e.member.startswith("<bytes>: zip entry ") and "empty member name" in str(e)


def _mutate(doc, rng: random.Random) -> None:
    """One to three random edits of a JSON document: values replaced by other types, deep
    or huge values, keys added or removed."""
    paths = []

    def walk(v, path):
        paths.append(path)
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, x in items:
            walk(x, path + (k,))

    walk(doc, ())
    replacements = [None, True, -1, 2**70, "x", "", [], {}, 1.5, "Infinity", {"as_int": 1}, {"as_none": []},
                    "HUGE", "DEEP", {"as_string_to_argument": {"k": {"as_graph": {}}}}]
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths[1:])
        try:
            parent = doc
            for k in path[:-1]:
                parent = parent[k]
            op = rng.randrange(3)
            if op == 0 and isinstance(parent, dict):
                parent.pop(path[-1], None)
            elif op == 1 and isinstance(parent, dict):
                parent["zz"] = rng.choice(replacements)
            else:
                parent[path[-1]] = rng.choice(replacements)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier edit removed or replaced this path
        if rng.random() < 0.1:
            _seven(doc)


@pytest.mark.parametrize("fixture", ["torch-2.6.0/mlp_dynamic", "torch-2.8.0/cond", "torch-2.13.0/cond", "torch-2.14.1/dict_inputs"])
def test_random_edits_fail_closed_and_name_their_member(fixture):
    """Seeded mutations of every JSON member: the load (and validate) either succeeds or raises a
    Pt2Error naming a member of the archive; nothing else escapes."""
    path = os.path.join(PT2, fixture + ".pt2")
    rng = random.Random(fixture)
    json_members = [n for n, _ in members(path) if n.endswith(".json")]
    for _ in range(60):
        member = rng.choice(json_members)
        data = edit_json(path, lambda doc: _mutate(doc, rng), member=member,
                         raw=lambda t: t.replace('"HUGE"', "9" * 5000).replace('"DEEP"', "[" * 300 + "]" * 300))
        try:
            with serde.load(data) as a:
                validate_archive(a)
        except Pt2FormatError as e:
            assert_names_member(e, data)
        except Pt2Error:
            pass


# -------------------------------------------------------------------- the text scan itself


def _reference_scan(raw: bytes) -> tuple[int, int, int]:
    """(max depth, longest digit run outside strings, longest string in bytes), char by char."""
    depth = max_depth = run = max_run = length = max_length = 0
    in_string = escaped = False
    for c in raw:
        if in_string:
            if escaped:
                escaped = False
            elif c == 0x5C:
                escaped = True
            elif c == 0x22:
                in_string = False
                max_length = max(max_length, length)
                continue
            length += 1
            continue
        if c == 0x22:
            in_string, length, run = True, 0, 0
        elif 0x30 <= c <= 0x39:
            run += 1
            max_run = max(max_run, run)
        else:
            run = 0
            depth += (c in b"[{") - (c in b"]}")
            max_depth = max(max_depth, depth)
    return max_depth, max_run, max_length


_TEXT = st.text(alphabet=st.sampled_from(list('ab[]{}"\\0123456789 \n\u00e9')), max_size=30)
_JSON = st.recursive(
    st.one_of(st.integers(-(10**30), 10**30), _TEXT, st.booleans(), st.none(), st.floats(allow_nan=False)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=40,
)


@settings(max_examples=500, deadline=None)
@given(_JSON, st.booleans(), st.integers(1, 8), st.integers(1, 12), st.integers(0, 40))
def test_scan_agrees_with_a_reference_tokenizer(value, ascii_only, depth, digits, string):
    """With small limits, the numpy scan refuses exactly what a char-by-char tokenizer finds."""
    raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    max_depth, max_run, max_length = _reference_scan(raw)
    saved = {k: getattr(json_codec, k) for k in ("MAX_JSON_DEPTH", "MAX_JSON_NUMBER_DIGITS", "MAX_JSON_STRING_BYTES", "_LONG_DIGIT_RUN")}
    json_codec.MAX_JSON_DEPTH, json_codec.MAX_JSON_NUMBER_DIGITS, json_codec.MAX_JSON_STRING_BYTES = depth, digits, string
    json_codec._LONG_DIGIT_RUN = b"0" * (digits + 1)
    try:
        json_codec.check_json_text(raw)
        refused = None
    except json_codec._TextLimit as e:
        refused = e.message
    finally:
        for k, v in saved.items():
            setattr(json_codec, k, v)
    if max_run > digits:
        assert refused and "digits" in refused
    elif max_length > string:
        assert refused and "string" in refused
    elif max_depth > depth:
        assert refused and "nested" in refused
    else:
        assert refused is None, refused


def test_this_module_is_torch_free():
    """The checks above need no torch: the module imports and one hostile load runs without it."""
    proc = run_torch_free(
        textwrap.dedent(
            f"""
            import sys
            sys.path[:0] = [{os.path.dirname(__file__)!r}, {os.path.join(os.path.dirname(os.path.dirname(__file__)), 'support')!r}]
            import test_hostile_json as t
            t.test_huge_int_in_weights_config()
            t.test_nested_subgraphs_past_the_limit()
            print("ok")
            """
        ),
        timeout=HOSTILE_TIMEOUT,
    )
    assert proc.stdout.strip() == "ok", proc.stderr[-2000:]
