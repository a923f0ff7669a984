"""What a child process that checks untrusted files may use: its address space.

Set by the child processes of ``supervised`` (the fleet scan's workers, ``tools/scan/worker.py``,
and the fuzzer's, ``fuzz/fuzz.py``):
each sets ``RLIMIT_AS`` to its own size after its imports plus a budget, so the budget is what
checking one file may add, whatever the libraries it imported weigh. Linux only (``/proc``).
"""

from __future__ import annotations

__all__ = ["vm_size", "limit_address_space"]


def vm_size() -> int:
    """This process's virtual memory size in bytes (``VmSize`` in ``/proc/self/status``), 0 if unknown."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def limit_address_space(extra_mib: int) -> None:
    """``RLIMIT_AS`` = this process's size now + ``extra_mib`` MiB (never above the hard limit)."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    limit = vm_size() + extra_mib * (1 << 20)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
