"""The torch bridge: schema objects <-> ``torch.export.ExportedProgram``. The only place pt2x
imports torch, and only when one of its functions is used.

``api`` (``save``, ``load_exported_program``, ``to_schema``, ``from_schema``; torch named in
``MissingExtraError`` when missing), ``serialize`` and ``metadata`` (torch program -> schema),
``values`` (torch values -> schema values), ``deserialize`` (schema -> torch program),
``graph_builder`` (schema graph -> ``torch.fx`` graph), ``ops`` (operator names -> torch
callables) and ``shape_env`` (symbolic shapes -> a ``ShapeEnv``).
"""
