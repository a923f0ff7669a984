"""The codecs: member bytes <-> schema objects, and the formats embedded in them.

``json_codec`` (the strict JSON codec, compiled from the schema), ``symbolic`` (the restricted
parser for shape expressions: nothing is evaluated), ``pickle_reader`` (the data-only reader for
the tensor pickles of older layouts: it imports and calls nothing), ``tensor_view`` (the bounds
check every stored tensor view passes, whichever layout it comes from), ``upgrade`` (schema
7.x programs lifted to 8.x), and two tables of torch facts: ``weights_only`` (the globals
``torch.load(weights_only=True)`` accepts) and ``devices`` (the device types it parses).
Torch-free.
"""
