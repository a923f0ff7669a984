"""Screenshots of Model Explorer showing a zoo model through pt2x's adapter, with a verify overlay.

Not a test (tests/explorer/ checks the adapter's JSON and the node data against Model Explorer's
own classes without a browser); this is the check as a person sees it. In order:

1. a child with tests/support on its path exports a model-zoo model (``--model``, default
   ``tv_resnet18``), saves it, converts it to ONNX with pt2x, scales one convolution's weight of
   the file (``--fault``, default ``layer3.0.conv1``) by 1.5, and runs ``pt2x verify --locate
   --node-data`` on it against torch eager;
2. Model Explorer's server starts where ``import torch`` fails, with ``--extensions=pt2x.explorer``,
   the ``.pt2`` and the node data (its built-in ``.pt2`` adapter is not loaded without torch: the
   graph is pt2x's);
3. Debian's Chromium, headless, driven over the DevTools protocol on a pipe (no extra package),
   opens the page, waits for the graph and the node data, and saves PNGs (``--out-dir``): the
   overview (layers collapsed, each with its children's colors), the first diverging node found
   by Model Explorer's search (its layers opened, it selected: its attributes and node data in the
   side panel), and, on a fresh server without node data, the node-data provider run from the UI
   on the faulted file (``explorer-provider.png``). PNGs are reduced to 256 colors where Pillow is
   installed.

Chromium runs with the flags a closed network needs (no background networking, no component
update, no sync, no QUIC, other hosts unresolvable). Prints what the page says (node data names,
the first divergence) so a run can be checked without looking.

    python -m scripts.explorer_screenshots [--model tv_resnet18] [--fault layer3.0.conv1] [--out-dir docs/images]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
SUPPORT = os.path.join(ROOT, "tests", "support")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-unsafe-swiftshader", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost"]
WIDTH, HEIGHT = 1400, 900

_SERVE = r"""
import sys
sys.modules["torch"] = None  # Model Explorer's built-in .pt2 adapter needs torch: only pt2x's is there
model, port, *node_data = sys.argv[1:]
sys.argv = ["model-explorer", model, "--extensions=pt2x.explorer", "--node_data_paths=" + ",".join(node_data),
            "--no_open_in_browser", "--skip_health_check", "--port", port]
from model_explorer.cmdline import main
main()
"""


def prepare(d: str, model: str, fault: str) -> dict:
    """Step 1, in a child whose PYTHONPATH holds tests/support."""
    import onnx
    import planted_faults as pf
    import torch
    from model_zoo import MODELS, export, redraw

    from pt2x.converters import to_onnx
    from pt2x.tools.cli import main as pt2x

    zm = MODELS[model]
    torch.manual_seed(0)
    net = redraw(zm.build(), seed=0, calibrate=zm.make_input(8)).eval()
    pt2, good, bad, nd = (os.path.join(d, n) for n in (f"{model}.pt2", "model.onnx", "fault.onnx", "node_data.json"))
    torch.export.save(export(zm, net, "exported"), pt2)
    to_onnx(pt2, good)
    proto = onnx.load(good)
    weight = next(i.name for i in proto.graph.initializer if i.name.startswith(f"{fault}.weight"))
    onnx.save(pf.scale_onnx_weight(proto, weight, 1.5), bad)
    rc = pt2x(["verify", pt2, bad, "--locate", "--node-data", nd])
    with open(nd, encoding="utf-8") as f:
        results = json.load(f)["graph"]["results"]
    first = [k for k, r in results.items() if r.get("textColor")]
    from pt2x.explorer.program_graph import program_graphs

    labels = {n["id"]: n["label"] for n in program_graphs(pt2)[0]["nodes"]}
    # the last node data loaded is the one shown: error over tolerance
    return {"pt2": pt2, "converted": bad, "node_data": [nd[: -len(".json")] + ".max_abs.json", nd], "verify_exit": rc,
            "weight": weight, "first_divergence": first, "first_label": labels.get(first[0]) if first else None, "past": sum(r["value"] > 1 for r in results.values()),
            "compared": len(results)}


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
    JSON messages ended by NUL, on its file descriptors 3 and 4)."""

    def __init__(self, profile: str):
        to_child, self._to_child = os.pipe()
        self._from_child, from_child = os.pipe()

        def fds():  # in the child, before it closes what pass_fds does not keep: the pipe ends as 3 and 4
            a, b = os.dup(to_child), os.dup(from_child)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen([shutil.which("chromium") or "chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                      "--remote-debugging-pipe", f"--window-size={WIDTH},{HEIGHT}"],
                                     pass_fds=(3, 4), preexec_fn=fds,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self._id, self._buf, self.session = 0, b"", None

    def send(self, method: str, params: dict | None = None, *, browser: bool = False) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if self.session and not browser:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self._buf:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed its DevTools pipe")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, browser=True)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, browser=True)["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1,
                                                         "mobile": False})
        self.send("Page.navigate", {"url": url})

    def js(self, expression: str):
        return self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})["result"].get("value")

    def wait_for_text(self, text: str, timeout: float = 120.0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            body = self.js("document.body ? document.body.innerText : ''") or ""
            if text in body:
                return body
            time.sleep(1.0)
        raise RuntimeError(f"the page never showed {text!r}")

    def click(self, x: float, y: float, *, alt: bool = False) -> None:
        """A real mouse click at (x, y) of the page, Alt held when ``alt``."""
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1,
                                                   "modifiers": 1 if alt else 0})

    def screenshot(self, path: str) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.send("Browser.close", browser=True)
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _server(pt2: str, node_data: list[str], port: int) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", _SERVE, pt2, str(port), *node_data], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    end = time.monotonic() + 120
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(f"http://localhost:{port}/"):
            return proc, line.strip()
    proc.kill()
    raise RuntimeError("Model Explorer's server did not start")


# What the page is asked to do: JavaScript run in it (Model Explorer's toolbar icons are Material
# icon names in its text).
_CLICK_ICON = """(() => {{ const icon = [...document.querySelectorAll('mat-icon')].find(e => e.textContent.trim() === '{}');
  if (!icon) return false; (icon.closest('button') || icon.closest('div') || icon).click(); return true; }})()"""
_SEARCH = """(() => {{ const box = document.querySelector('input[placeholder^="Search"]'); if (!box) return false;
  box.focus(); box.value = {!r}; box.dispatchEvent(new Event('input', {{bubbles: true}})); return true; }})()"""
_RECT = """(() => {{ const hit = [...document.querySelectorAll('*')].filter(e => e.children.length === 0
  && e.textContent.trim() === {!r}).pop(); if (!hit) return null; const r = hit.getBoundingClientRect();
  return [r.x + r.width / 2, r.y + r.height / 2]; }})()"""


def shoot(info: dict, out_dir: str, port: int) -> list[str]:
    proc, url = _server(info["pt2"], info["node_data"], port)
    profile = tempfile.mkdtemp(prefix="pt2x-chromium-")
    browser = Chromium(profile)
    shots = []
    try:
        browser.open(url)
        body = browser.wait_for_text("NODE DATA PROVIDERS")
        browser.wait_for_text("error / tolerance")
        time.sleep(3)
        print("page:", " | ".join(x for x in body.splitlines()[:12] if x.strip()))
        shots.append(os.path.join(out_dir, "explorer-overview.png"))
        browser.screenshot(shots[-1])
        first = info["first_divergence"][0] if info["first_divergence"] else None
        if first:  # search for it, then alt-click its result: Model Explorer opens its layers, centers and selects it
            browser.js(_SEARCH.format(f"^{first}$"))
            time.sleep(2)
            at = browser.js(_RECT.format(info["first_label"]))
            print("search result at:", at)
            if at:
                browser.click(*at, alt=True)
                time.sleep(5)
                close = browser.js(_RECT.format("close"))
                if close:
                    browser.click(*close)
                    time.sleep(2)
        shots.append(os.path.join(out_dir, "explorer-fault.png"))
        browser.screenshot(shots[-1])
        text = browser.js("document.body.innerText") or ""
        print("side panel:", " | ".join(x for x in text.splitlines() if first and first in x)[:300])
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return shots


_DIALOG_INPUTS = """[...document.querySelectorAll('input')].filter(e => e.closest('mat-dialog-container, [role=dialog]'))
  .map(e => { const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2, e.value]; })"""


def shoot_provider(info: dict, out_dir: str, port: int) -> list[str]:
    """The node-data provider as a person runs it: "Add per-node data", pt2x verify, the converted
    file's path typed in, Run; the overlay it computes (torch-free: against pt2x's ONNX)."""
    proc, url = _server(info["pt2"], [], port)
    profile = tempfile.mkdtemp(prefix="pt2x-chromium-")
    browser = Chromium(profile)
    shots = []
    try:
        browser.open(url)
        browser.wait_for_text("GRAPH INFO")
        time.sleep(2)
        for text in ("Add per-node data", "pt2x verify: where a converted file differs"):
            at = browser.js(_RECT.format(text))
            if not at:
                raise RuntimeError(f"no {text!r} on the page")
            browser.click(*at)
            time.sleep(2)
        empty = [i for i in browser.js(_DIALOG_INPUTS) or [] if i[2] == ""]
        if not empty:
            raise RuntimeError("the provider's dialog has no path field")
        browser.click(*empty[0][:2])
        browser.send("Input.insertText", {"text": info["converted"]})
        time.sleep(1)
        browser.click(*browser.js(_RECT.format("Run")))
        body = browser.wait_for_text("error / tolerance", timeout=600)
        time.sleep(3)
        print("provider:", " | ".join(x for x in body.splitlines() if "tolerance (" in x or "max abs error (" in x)[:300])
        shots.append(os.path.join(out_dir, "explorer-provider.png"))
        browser.screenshot(shots[-1])
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return shots


def _compact(path: str) -> None:
    """The screenshot with a 256-color palette (a user interface has few colors; a third of the
    bytes), where Pillow is installed."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.explorer_screenshots", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="tv_resnet18", help="a model of tests/support/model_zoo.py")
    p.add_argument("--fault", default="layer3.0.conv1", help="the module whose convolution weight is scaled")
    p.add_argument("--out-dir", default=os.path.join(ROOT, "docs", "images"))
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--prepare", nargs=3, metavar=("DIR", "MODEL", "FAULT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.prepare:
        print(json.dumps(prepare(*args.prepare)))
        return 0
    if shutil.which("chromium") is None:
        print("Debian's chromium is not installed (apt-get install -y chromium)", file=sys.stderr)
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pt2x-explorer-shots-") as d:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([SUPPORT, os.path.dirname(ROOT), ROOT,
                                                           os.environ.get("PYTHONPATH", "")]))
        r = subprocess.run([sys.executable, "-m", "scripts.explorer_screenshots", "--prepare", d, args.model, args.fault],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=1200)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        if r.returncode != 0 or not lines:
            print(r.stderr[-3000:], file=sys.stderr)
            return 1
        info = json.loads(lines[-1])
        print(f"verify exit {info['verify_exit']}: {info['weight']} x1.5; first divergence {info['first_divergence']}, "
              f"{info['past']} of {info['compared']} compared nodes past tolerance")
        for shot in shoot(info, args.out_dir, args.port) + shoot_provider(info, args.out_dir, args.port + 1):
            _compact(shot)
            print(f"wrote {shot} ({os.path.getsize(shot)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
