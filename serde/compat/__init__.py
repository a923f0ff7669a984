"""Compatibility with a target torch release: can it read this file, and what to write so it can.

``releases`` (what each torch release wrote and reads), ``target`` (one program's JSON against
one release's schema: blockers, and a copy it can read) and ``plan`` (the one planner that
``save(target_schema=)``, ``pt2x convert --to pt2`` and ``pt2x validate --target`` all use).
Torch-free.
"""
