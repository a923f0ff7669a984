"""Run code in a subprocess where ``import torch`` fails: the proof a path is torch-free.

``run_torch_free``/``run_cli_torch_free`` run one snippet or one CLI call; ``convert_torch_free``
is the converter the ONNX and TFLite parity suites use (``onnx_zoo.converted``,
``tflite_zoo.converted``): one long-lived subprocess with torch unimportable."""

from __future__ import annotations

import atexit
import subprocess
import sys
import textwrap

_PRELUDE = "import sys\nsys.modules['torch'] = None  # any 'import torch' now raises ImportError\n"


def run_torch_free(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` (a Python snippet) with torch unimportable; returns the completed process."""
    src = _PRELUDE + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", src, *args], capture_output=True, text=True, timeout=timeout)


def run_cli_torch_free(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the ``pt2x`` CLI with torch unimportable."""
    code = "import sys\nfrom pt2x.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return run_torch_free(code, *argv, timeout=timeout)


# ------------------------------------------------- one long-lived torch-free converter

_WORKER = r"""
import sys
sys.modules['torch'] = None  # any 'import torch' now raises ImportError
import pickle, struct
inp, out = sys.stdin.buffer, sys.stdout.buffer
sys.stdout = sys.stderr  # nothing a conversion prints may reach the reply pipe
import pt2x.converters

def as_reply(result):  # a model as its bytes; None (a file was written); a tuple of files (to_pte's .pte, .ptd)
    if result is None or isinstance(result, (bytes, memoryview)):
        return None if result is None else bytes(result)
    if isinstance(result, tuple):
        return tuple(as_reply(x) for x in result)
    return result.SerializeToString()

def read():
    head = inp.read(8)
    return None if len(head) < 8 else pickle.loads(inp.read(struct.unpack("<Q", head)[0]))

while (req := read()) is not None:
    fn, args, kwargs = req
    try:
        result = getattr(pt2x.converters, fn)(*args, **kwargs)
        reply = ("ok", as_reply(result))
    except Exception as e:
        try:
            pickle.loads(pickle.dumps(e))  # it must survive the trip
            reply = ("error", e)
        except Exception:
            reply = ("error", RuntimeError(f"{type(e).__name__}: {e}"))
    data = pickle.dumps(reply)
    out.write(struct.pack("<Q", len(data)) + data)
    out.flush()
"""


class TorchFreeConverter:
    """``pt2x.converters.<fn>(*args, **kwargs)`` run in one long-lived subprocess where ``import
    torch`` fails, so every conversion the parity suites check is proven torch-free, at the cost
    of one process start per test session. Returns the serialized model (bytes; None when the
    converter wrote a file; a tuple for several files, as ``to_pte``'s .pte and .ptd); an exception the
    converter raised is re-raised here with its own class and attributes."""

    def __init__(self):
        self._proc: subprocess.Popen | None = None

    def _started(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE)
        return self._proc

    def __call__(self, fn: str, *args, **kwargs) -> bytes:
        import pickle
        import struct

        proc = self._started()
        data = pickle.dumps((fn, args, kwargs))
        proc.stdin.write(struct.pack("<Q", len(data)) + data)
        proc.stdin.flush()
        head = proc.stdout.read(8)
        if len(head) < 8:
            raise RuntimeError(f"the torch-free converter exited with {proc.wait()} during {fn}{args}")
        kind, value = pickle.loads(proc.stdout.read(struct.unpack("<Q", head)[0]))
        if kind == "error":
            raise value
        return value

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.stdin.close()
            self._proc.wait(timeout=30)


convert_torch_free = TorchFreeConverter()
atexit.register(convert_torch_free.close)
