"""Limits on what a verification may allocate for its inputs, each with its reason.

The program's signature and the user's ``.npz`` state sizes: both are checked against these
before an array is allocated or a member inflated (``inputs``).
"""

MAX_INPUT_BYTES = 1 << 30
"""1 GiB for one input set, all its arrays together. Verification inputs are a batch or two of
images, token ids or features: megabytes. Both runtimes and the reference run on the set (and
with ``--locate`` keep every intermediate value), so a set this large is already far past what a
check of a converted file needs; without the bound a signature with a static input of
2 x 3 x 100000 x 100000 asks numpy for 447 GiB, and a 236-byte ``.npz`` for 224 GiB."""

MAX_NPY_HEADER_BYTES = 10_000
"""Bytes of one ``.npy`` header (numpy's own default bound: real headers are ~100 bytes)."""
