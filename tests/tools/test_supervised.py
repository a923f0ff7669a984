"""``pt2x.tools.supervised``: the child process behind the scan's and the fuzzer's workers.

Real children (``python -c``), each dying a different way: the death is named for what
happened (an exit status, a signal, the system's kill, an allocation failure in its log), a
child past its deadline is seen as expired, and a restarted child answers again.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

import pytest

from pt2x.tools.supervised import Supervised

ECHO = """
import json, sys
from pt2x.tools.supervised import child_channel
channel = child_channel()
print("this goes to the log, not the channel")
channel.write(json.dumps({"ready": True}) + "\\n")
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("die") == "exit":
        sys.exit(3)
    if msg.get("die") == "segv":
        import os, signal
        os.kill(os.getpid(), signal.SIGSEGV)
    if msg.get("die") == "memory":
        sys.stderr.write("MemoryError\\n")
        sys.exit(1)
    if msg.get("die") == "hang":
        import time
        time.sleep(600)
    channel.write(json.dumps({"echo": msg}) + "\\n")
"""


def _messages(child: Supervised, want: int = 1, timeout: float = 60) -> tuple[list[dict], bool]:
    got, end = [], time.monotonic() + timeout
    while len(got) < want and time.monotonic() < end:
        select.select([child], [], [], 0.5)
        messages, eof = child.read()
        got += messages
        if eof:
            return got, True
    return got, False


@pytest.fixture
def child(tmp_path):
    c = Supervised([sys.executable, "-c", ECHO], startup_timeout=60, log_path=str(tmp_path / "child.log"))
    c.start()
    assert _messages(c) == ([{"ready": True}], False)
    yield c
    c.stop(grace=0)


def test_messages_go_both_ways_and_prints_go_to_the_log(child):
    child.begin_task(30)
    assert child.send({"x": 1})
    assert _messages(child) == ([{"echo": {"x": 1}}], False)
    assert "this goes to the log" not in child.log_since_task()  # written before the task began
    child.stop()
    assert child.proc is None


@pytest.mark.parametrize("die, kind, what", [
    ("exit", "crash", "exit status 3"),
    ("segv", "crash", "SIGSEGV"),
    ("memory", "oom", "exit status 1 after an allocation failure"),
])
def test_a_death_is_named(child, die, kind, what):
    child.begin_task(30)
    child.send({"die": die})
    assert _messages(child)[1], "the child did not die"
    death = child.death(child.reap())
    assert (death.kind, death.what) == (kind, what)


def test_killed_by_the_system_is_out_of_memory(child):
    child.begin_task(30)
    os.kill(child.proc.pid, signal.SIGKILL)  # not from the parent: what the OOM killer does
    assert _messages(child)[1]
    death = child.death(child.reap())
    assert death.kind == "oom" and death.what.startswith("SIGKILL: killed by the system")


def test_expired_then_restarted(child):
    child.begin_task(0.2)
    child.send({"die": "hang"})
    assert not child.expired(time.monotonic())
    time.sleep(0.3)
    assert child.expired(time.monotonic())
    pid = child.proc.pid
    child.restart()
    assert child.proc.pid != pid
    assert _messages(child) == ([{"ready": True}], False)
    child.begin_task(30)
    child.send({"again": True})
    assert _messages(child) == ([{"echo": {"again": True}}], False)
