"""The Model Explorer adapter run as Model Explorer's server runs it, where ``import torch`` fails:
its extension manager loads ``pt2x.explorer`` and converts each file (``convert_torch_free``); what
every graph list must be for Model Explorer to draw it (``check_well_formed``); and the node names
torch gives a loaded program, which the adapter's ids must equal (``fx_node_names``)."""

from __future__ import annotations

import json

from torchfree import run_torch_free

_CONVERT = r"""
import json, sys
import model_explorer.extension_manager as em
assert em.torch is None  # Model Explorer itself found no torch
manager = em.ExtensionManager(["pt2x.explorer"])
manager.load_extensions()
ids = {e.metadata.id: e.type for e in manager.extensions}
assert ids.get("pt2x_adapter") == "adapter" and ids.get("pt2x_verify") == "node_data_provider", ids
out = {}
for path in sys.argv[1:]:
    try:
        out[path] = manager.run_cmd({"extensionId": "pt2x_adapter", "cmdId": "convert", "modelPath": path,
                                     "settings": {"const_element_count_limit": 16}, "deleteAfterConversion": False})
    except Exception as e:
        out[path] = {"error": type(e).__name__, "message": str(e)}
print(json.dumps(out))
"""


def convert_torch_free(paths: list[str]) -> dict:
    """{path: Model Explorer's response ({"graphs": [...]}), or {"error", "message"}}."""
    r = run_torch_free(_CONVERT, *paths, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def check_well_formed(graphs: list[dict]) -> None:
    """Unique graph and node ids, edges from nodes of the same graph, subgraphs that exist."""
    graph_ids = {g["id"] for g in graphs}
    assert len(graph_ids) == len(graphs)
    for g in graphs:
        ids = [n["id"] for n in g["nodes"]]
        assert len(ids) == len(set(ids)), g["id"]
        for n in g["nodes"]:
            assert "/" not in n["label"]
            for e in n["incomingEdges"]:
                assert e["sourceNodeId"] in ids, (g["id"], n["id"], e)
            assert set(n["subgraphIds"]) <= graph_ids


def fx_node_names(ep) -> dict[str, list[str]]:
    """Graph id -> the FX node names of ``ep`` (a loaded ``ExportedProgram``), subgraphs as the
    adapter names them (``<parent>/<node>.<attribute>``)."""
    import torch

    out = {"graph": [n.name for n in ep.graph.nodes]}

    def walk(gm, gid):
        for n in gm.graph.nodes:
            for a in n.args if n.op == "call_function" else ():
                if isinstance(a, torch.fx.Node) and a.op == "get_attr":
                    sid = f"{gid}/{n.name}.{a.target}"
                    out[sid] = [m.name for m in getattr(gm, a.target).graph.nodes]
                    walk(getattr(gm, a.target), sid)

    walk(ep.graph_module, "graph")
    return out
