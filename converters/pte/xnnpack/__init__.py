"""pt2x.converters.pte.xnnpack: the parts of a PTE plan XNNPACK runs, as ``XnnpackBackend``
payloads (docs/pte.md, "XNNPACK delegation"), torch-free.

Modules, in the order data flows: ``delegate`` (``delegate_to_xnnpack``: the phases) ->
``int8`` (PT2E's quantizes and dequantizes as units of the plan, and as int8 values) ->
``ops_conv`` (convolution, batch norm), ``ops_nn`` (fully connected, pools, batched matmul),
``ops_elementwise``, ``ops_shape`` (one check and one emitter per portable kernel, filling
``table``), ``ops_int8`` (the int8 form of a call in "dq -> op -> q") -> ``fuse`` (activations
as output bounds) -> ``partition`` (the groups) and
``builder`` (one group's XNNGraph: layout, constants, externals) -> ``constants`` (named blobs,
streamed), ``schedule`` (the nodes' order), ``payload`` (the XH00 header and the XN01
flatbuffer, with flatc's ``schema_generated.py`` of ``schema.fbs``) -> ``index`` (who reads and
writes what in the plan) and ``graph`` (the XNNGraph IR).
"""
