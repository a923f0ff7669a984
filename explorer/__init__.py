"""pt2x.explorer: programs and converted files as Model Explorer sees them, without torch.

``pt2x[explorer]`` is a Model Explorer extension (``model-explorer --extensions=pt2x.explorer``):
an adapter for ``.pt2`` and ``.pte`` files and a node-data provider that runs ``pt2x verify
--locate`` from the UI. One concern per module:

* ``fx_names``: the node names torch gives a loaded program (Model Explorer's node ids);
* ``program_graph``: a ``.pt2`` program as Model Explorer graphs (JSON dicts);
* ``pte_graph``: an ExecuTorch ``.pte`` program as Model Explorer graphs;
* ``overlay``: a verification's per-value errors as Model Explorer node data, for the program's
  graph and for the converted file's;
* ``picture``: a static picture of a program (Graphviz), collapsed by module, with an overlay's colors;
* ``main``: the extension classes Model Explorer loads (the only module that imports it).

A tool: it reads through serde, the converters' front end and verification; nothing below imports it.
"""

from __future__ import annotations

__all__ = ["graphs"]


def graphs(path) -> list[dict]:
    """Model Explorer graphs (``graph_builder.Graph`` as JSON dicts) of a ``.pt2`` or ``.pte`` file."""
    from ..converters.pte.reader import is_pte

    if is_pte(path):
        from .pte_graph import pte_graphs

        return pte_graphs(path)
    from .program_graph import program_graphs

    return program_graphs(path)
