"""``pt2x scan``: check a fleet of ``.pt2`` artifacts on a local process pool or on Ray.

One concern per module, in the order data flows:

``discover``    PATH / GLOB / fsspec URL arguments -> the artifacts (location, size), sorted
``options``     what a scan checks and under which limits (shared by every runner)
``check``       one artifact -> one result dict, in process (inspect, validate, target, conversions)
``worker``      that check in a child process under a memory limit, and the parent's handle on it
                (``tools/supervised.py``'s child: timeout, crash and out-of-memory turned into
                that artifact's result)
``pool``        the local runner: N workers, results as they complete
``ray_runner``  the Ray runner: chunks of artifacts as Ray tasks, streamed back with ``ray.wait``
``results``     the JSONL output, one line per artifact, and ``--resume``
``report``      the summary from streaming, bounded counters (table or JSON)
``progress``    the progress bar (a terminal only)
``driver``      ties them together for ``pt2x scan`` (``tools/cmd_scan.py``)

Only ``ray_runner`` imports ray, and only ``discover`` imports fsspec (lazily; ``check`` reads a URL
through ``discover.open_url``).
"""
