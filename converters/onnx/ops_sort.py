"""Lowerings that order or search values: ``msort``, ``kthvalue``, ``mode``, ``searchsorted``,
``bucketize``, ``isin``, quantiles and the medians."""

from __future__ import annotations
