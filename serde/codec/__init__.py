"""Codecs: the strict JSON codec, the restricted symbolic-expression parser, the data-only unpickler."""
