"""The Model Explorer extension: ``model-explorer --extensions=pt2x.explorer`` (it loads this module).

* ``Pt2xAdapter`` opens ``.pt2`` and ``.pte`` files without torch (``program_graph``,
  ``pte_graph``): a file the reader refuses is refused with its error, naming the member and the
  field; nothing in it runs.
* ``Pt2xVerifyProvider``, a node-data provider: on a ``.pt2`` graph, give it the path of a
  converted ``.onnx`` or ``.tflite`` and it runs ``pt2x verify --locate`` and colors the graph with
  each node's error over its tolerance (``overlay``). Also the max abs and max rel errors.

The only module of pt2x that imports ``model_explorer``: the graphs and node data are built as
JSON dicts below, and read here into Model Explorer's own dataclasses (``dacite``, strict: a key
they do not know is an error, not a silent drop).
"""

from __future__ import annotations

import os

import dacite
import model_explorer
from model_explorer import graph_builder, node_data_builder
from model_explorer.config_editor import DropDownConfigEditor, OptionItem, TextInputConfigEditor

from . import graphs as read_graphs

__all__ = ["Pt2xAdapter", "Pt2xVerifyProvider", "as_graph", "as_graph_node_data"]

ADAPTER_ID = "pt2x_adapter"
PROVIDER_ID = "pt2x_verify"
_STRICT = dacite.Config(strict=True)


def as_graph(data: dict) -> graph_builder.Graph:
    """A graph dict (``program_graph``) as Model Explorer's ``Graph``; a key it lacks raises."""
    return dacite.from_dict(graph_builder.Graph, data, config=_STRICT)


def as_graph_node_data(data: dict) -> node_data_builder.GraphNodeData:
    return dacite.from_dict(node_data_builder.GraphNodeData, data, config=_STRICT)


class Pt2xAdapter(model_explorer.Adapter):
    """``.pt2`` (torch.export) and ``.pte`` (ExecuTorch) programs, read by pt2x without torch."""

    metadata = model_explorer.AdapterMetadata(
        id=ADAPTER_ID,
        name="pt2x: .pt2 and .pte, torch-free",
        description="torch.export .pt2 and ExecuTorch .pte programs, read by pt2x without torch; node ids are "
                    "torch's FX node names, namespaces the module calls.",
        source_repo="pt2x",
        fileExts=["pt2", "pte"],
    )

    def convert(self, model_path: str, settings: dict) -> model_explorer.ModelExplorerGraphs:
        return {"graphs": [as_graph(g) for g in read_graphs(model_path)]}


_VALUES = ("max_abs", "max_rel", "ratio")
"""The node data a run returns, in this order: Model Explorer shows the last, error over tolerance."""


class Pt2xVerifyProvider(model_explorer.NodeDataProvider):
    """Runs ``pt2x verify --locate`` of a converted file against the program shown."""

    metadata = model_explorer.NodeDataProviderMetadata(
        id=PROVIDER_ID,
        name="pt2x verify: where a converted file differs",
        description="Runs a converted .onnx or .tflite against this program (torch eager when installed, else "
                    "pt2x's ONNX) and colors each node by its error over the tolerance.",
        icon="difference",
        filter=model_explorer.NodeDataProviderFilter(modelFileExts=["pt2"]),
    )

    def get_config_editors(self, provider_id: str) -> model_explorer.GetConfigEditorsResult:
        return model_explorer.GetConfigEditorsResult(configEditors=[
            TextInputConfigEditor(id="converted", label="Converted file", required=True,
                                  description="Path of the .onnx or .tflite converted from this program"),
            DropDownConfigEditor(id="reference", label="Reference", defaultValue="auto",
                                 options=[OptionItem("auto", "torch eager where installed, else pt2x's ONNX"),
                                          OptionItem("onnx", "pt2x's ONNX")]),
        ])

    def run(self, provider_id: str, model_path: str, graph_id: str, config_values: dict,
            graph) -> model_explorer.NodeDataProviderResult:
        from ..serde.errors import Pt2Error
        from ..verification import verify
        from .overlay import overlays
        from .program_graph import program_graphs

        converted = os.path.expanduser(str(config_values.get("converted") or "").strip())
        if not converted:
            return model_explorer.NodeDataProviderResult(error="give the path of the converted .onnx or .tflite")
        try:
            report = verify(model_path, converted, locate=True, use_torch=config_values.get("reference") != "onnx")
            shown = next(g for g in program_graphs(model_path) if g["id"] == graph_id)
            data = overlays(report, shown)
        except (Pt2Error, StopIteration) as e:
            return model_explorer.NodeDataProviderResult(error=str(e) or f"no graph {graph_id!r} in {model_path}")
        return model_explorer.NodeDataProviderResult(
            result=[as_graph_node_data(data[key][graph_id]) for key in _VALUES])
