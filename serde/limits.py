"""Limits on untrusted input, each with the reason it is what it is.

They bound memory and time spent on a hostile file before anything is decoded.
"""

MAX_JSON_BYTES = 1 << 30
"""1 GiB of JSON per member: a 12-layer encoder's decomposed graph is ~2 MB; 500x headroom."""

MAX_JSON_DEPTH = 200
"""Nesting depth of JSON values. torch's deepest real nesting (nested control flow
subgraphs inside node arguments) is ~10 levels per graph level; 200 allows ~15 nested
subgraphs and stays far below Python's recursion limit, so no RecursionError."""

MAX_MEMBERS = 1_000_000
"""Zip members: far past any real archive (one member per weight tensor)."""

MAX_COMPRESSION_RATIO = 200
"""Deflated members may expand at most 200x (zip bombs reach 1000x+; JSON text ~5-20x)."""

MAX_UNCOMPRESSED_MEMBER = 4 << 30
"""4 GiB for a compressed member once inflated: torch itself never compresses weights,
so only JSON or small files are ever deflated; stored (uncompressed) members are
memory-mapped and bounded by the file size instead."""

MAX_EXPR_CHARS = 100_000
"""Characters in one symbolic shape expression (real ones are < 200)."""

MAX_EXPR_DEPTH = 100
"""Nesting depth of a symbolic expression tree."""

MAX_TENSOR_RANK = 64
"""Dimensions of one tensor (torch's own limit is 64 for most kernels)."""

MAX_PICKLE_OPS = 10_000_000
"""Opcodes read from one legacy weights pickle before it is refused."""

MAX_TENSOR_ELEMENTS = 1 << 40
"""Elements in one tensor view read from a pickle (~1.1e12; the largest real weight
matrices are ~1e9-1e10). Stride-0 (expanded) views can claim any size over a tiny
storage, so the product of sizes is bounded on its own, before numpy is asked."""

MAX_PICKLE_DEPTH = 100
"""Nesting of containers in a pickled value tree (sample inputs are (args, kwargs) pytrees,
a few levels deep); bounds the recursive walk that turns records into arrays."""

MAX_EXPR_INT_BITS = 4096
"""Bits of an integer computed while evaluating a symbolic expression (Pow, LShift, Mul).
Sizes fit in 64 bits; the bound stops ``2**2**2**...`` from taking unbounded time and memory."""

MAX_AMPLIFIED_BYTES = 1 << 28
"""256 MiB per weights member (one legacy pickle, one ``*_weights_config.json``) that tensors
may claim beyond the bytes the file stores for them: an overlapping view (stride 0,
broadcast: ``torch.ones(1, 4).expand(1000, 4)``) counts its elements past the storage span
it reads, and a copy made to apply torch's neg/conj bits counts its size. Real expanded
constants and conj/neg views are kilobytes, and a real weight is never a stride-0 view;
without the bound a 7 KB file claims a 2**40-element view, which anything that
materialises it (``np.ascontiguousarray``, an ONNX initializer) tries to allocate (4 TiB)."""

MAX_PICKLE_STACK = 100_000
"""Values on a legacy pickle's stack at once. Real pickles stay in the low thousands (the
pickler batches APPENDS/SETITEMS by 1,000; a state dict entry adds a handful); without the
bound each one-byte ``EMPTY_LIST`` keeps a ~72-byte list alive, so a 2 MB member asks the
unpickler for ~150 MB."""

MAX_PICKLE_MEMO = 2_000_000
"""Memo entries in one legacy pickle (each keeps its value alive until the end). torch.save
memoizes about six values per tensor (storage tuple, key, location, sizes, strides, hooks),
so the bound covers ~330,000 tensors in one pickle, far past the largest real state dicts."""

MAX_PICKLE_WORK_PER_BYTE = 16
"""Elements the unpickler may hash or copy per byte of a legacy pickle: dict keys, set
items and builder arguments, counted with repetition (a memoized tuple used N times counts
N times its size). Real pickles do at most 0.6 per byte (the fixtures' state dicts and
sample inputs, torch.save of sets, bytes, complex, tuple keys, subclassed tensors); memo
references let a few KB stand for a tuple of 64**12 elements whose hash never ends."""

MAX_JSON_NUMBER_DIGITS = 100
"""Digits in one run of a JSON number (integer part, fraction or exponent). torch writes
int64 values (at most 19 digits) and shortest-repr floats (17 significant digits);
converting a number of n digits to an int costs O(n^2), and Python refuses past 4300
digits with a ValueError (or not at all where a program lifted that limit)."""

MAX_JSON_STRING_BYTES = 1 << 22
"""4 MiB in one JSON string (UTF-8 bytes, escapes as written). The longest strings torch
writes are stack traces and module paths in node metadata, a few KB (490 bytes is the
longest in a 12-layer encoder's 1.8 MB graph); names are dict keys, hashed and copied."""

MAX_JSON_ITEMS = 1_000_000
"""Items in one JSON list or object. The longest in real files are a graph's nodes and
tensor_values (~900 in a 12-layer encoder, ~10^4-10^5 in the largest exported LLMs) and a
payload config's tensors; a million is 10x past those and bounds what one list costs
every walk after decoding."""

MAX_GRAPH_NODES = 1_000_000
"""Nodes in one graph (subgraphs counted on their own): 10x the largest exported LLMs."""

MAX_GRAPH_VALUES = 2_000_000
"""Named values in one graph (tensor_values + sym_int/sym_bool/sym_float_values +
custom_obj_values): about one per node output, so twice ``MAX_GRAPH_NODES``."""

MAX_SUBGRAPH_DEPTH = 16
"""Subgraphs (``as_graph``: cond branches, while_loop/map/scan bodies) nested in one another.
Real programs nest them as deep as the user's control flow, 1-4 levels; each level is ~7
JSON levels, so 16 stays within ``MAX_JSON_DEPTH``. validate, the converters and the
torch bridge walk subgraphs recursively."""
