"""pt2x.converters.aten: the ATen front end, what any target lowering torch.export programs needs.

A program (schema objects and numpy weights from ``pt2x.serde.load``) is read, checked and
walked here; a target (``converters/onnx/``) only registers one lowering per ATen overload
and builds its own values. The modules, in the order data flows:

* ``graph``: ``open_program`` and the read-only ``ProgramView`` (tensors, symbols, weights,
  mutations, subgraphs);
* ``signatures`` (+ the generated ``_signature_table``) and ``precheck``: every node against
  torch's schema of its target, checked once before lowering;
* ``registry``: lowerings by backend and target; ``args``: a node's arguments by schema name;
* ``lower``: the driver every target shares (nodes in order through the registry, refusals
  into the report, in-place ops and mutations);
* ``views`` and ``layouts``: the view-mutation pass (writes through views reach their base)
  and what torch recorded about memory layout;
* ``dtypes``: torch's dtypes as numpy's and torch's promotion rules;
* ``failures``: ATen nodes named in the unsupported-operator report and in lowering errors;
* ``module_stack``: a node's ``nn_module_stack``, the module calls it sits in.

It imports no target; the targets import it.
"""
