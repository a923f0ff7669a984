"""Compatibility: what a target torch release can read, and the one rewrite/downgrade path."""
