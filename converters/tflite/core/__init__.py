"""The TFLite target's core, which every stage reads: the TFLite model as plain data (``model``:
``Program``, ``Subgraph`` with its kept uses index, ``Op``, ``Tensor``), the one table of builtins
(``builtins``), the mapping state and node loop (``emit``), the integer rule (``int_compute``),
operator versions (``op_versions``), static shapes for XNNPACK (``shapes``), the constants of a
layer (``layer_constants``), window geometry (``window``) and the declared ONNX attributes of each
mapper (``op_attributes``). It imports no other stage."""
