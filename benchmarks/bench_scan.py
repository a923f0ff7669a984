"""Benchmark: ``pt2x scan`` over a generated fleet with ``--jobs 1``, ``--jobs 2`` and a local Ray.

    python -m benchmarks.bench_scan [--count 2000] [--convert onnx] [--target torch==2.10] [--keep DIR]
    python -m benchmarks.bench_scan --fleet registry-sample/ --sides jobs1      # a fleet of your own

The fleet (``make_fleet``, also the tests' fleet) is copies and variants of the committed
fixtures of every torch release: hard links, files cut short, junk named ``*.pt2`` and
hostile archives from the fuzzer's mutations (``fuzz_mutations.make_case``), in 8 folders.
Each side is ``python -m pt2x scan`` in its own process, one after the other; the parent polls
the RSS of that process's whole tree (workers, and Ray's own processes) every 50 ms and watches
the results file grow. Printed per side: wall seconds and artifacts/s (start-up included), the
steady rate (first to last record), peak tree RSS, the workers' own time per check, and the CPU
seconds of the whole tree; then the speed-up over ``--jobs 1`` and the cost per artifact per CPU
that a cluster's throughput scales by. On a machine shared with other jobs, CPU ms/artifact is
the figure least disturbed by them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

__all__ = ["make_fleet", "main"]

FOLDERS = 8


def _fixtures() -> list[str]:
    from fuzz.fuzz import default_fixtures

    return default_fixtures()


def _link(src: str, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another filesystem
        shutil.copyfile(src, dst)


def _junk(rng: random.Random) -> bytes:
    return rng.choice([b"", b"not a zip at all\n", b"PK\x03\x04" + bytes(rng.randrange(256) for _ in range(64)),
                       b"PK\x05\x06" + b"\0" * 18])


def make_fleet(folder: str | os.PathLike, count: int, seed: int = 0) -> Counter:
    """Write ``count`` artifacts under ``folder`` (in ``FOLDERS`` sub-folders); returns how many
    of each kind: ``fixture`` (every committed fixture once, hard-linked), ``copy`` (hard links
    of a random fixture), ``truncated`` (a fixture cut at a random byte), ``junk`` (not an
    archive), ``hostile`` (a fuzzer mutation). Deterministic in ``(count, seed)``."""
    from fuzz import fuzz_mutations as fm

    fixtures, rng, kinds = _fixtures(), random.Random(f"pt2x-fleet:{seed}"), Counter()
    root = Path(folder)
    for i in range(count):
        sub = root / f"team{i % FOLDERS:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        if i < len(fixtures):
            kind, src = "fixture", fixtures[i]
        else:
            r, src = rng.random(), rng.choice(fixtures)
            kind = "copy" if r < 0.45 else "truncated" if r < 0.55 else "junk" if r < 0.6 else "hostile"
        release = Path(src).parent.name
        dst = sub / f"{i:05d}-{kind}-{release}-{Path(src).stem}.pt2"
        if dst.exists():  # a fleet made again in the same place (--keep)
            dst.unlink()
        if kind in ("fixture", "copy"):
            _link(src, dst)
        elif kind == "truncated":
            data = Path(src).read_bytes()
            dst.write_bytes(data[: rng.randrange(len(data))])
        elif kind == "junk":
            dst.write_bytes(_junk(rng))
        else:
            dst.write_bytes(fm.make_case(seed, i, fixtures).data)
        kinds[kind] += 1
    return kinds


def _proc_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (parent pid, resident bytes, CPU ticks used so far: user + system), from /proc."""
    page = os.sysconf("SC_PAGE_SIZE")
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # after the command: state, ppid, ..., utime (index 11), stime (12), ..., rss (21)
        table[int(entry)] = (int(fields[1]), int(fields[21]) * page, int(fields[11]) + int(fields[12]))
    return table


def _tree(pid: int, table: dict[int, tuple[int, int, int]]) -> list[int]:
    children: dict[int, list[int]] = {}
    for p, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(p)
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


class _Lines:
    """Watches the results file grow: when its first and its last line appeared."""

    def __init__(self, path: str):
        self.path, self.offset, self.count, self.first, self.last = path, 0, 0, None, None

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                new = f.read()
        except FileNotFoundError:
            return
        n = new.count(b"\n")
        if n:
            now = time.perf_counter()
            self.first = self.first or now
            self.last, self.count = now, self.count + n
            self.offset += new.rfind(b"\n") + 1

    def steady_rate(self) -> float:
        """Artifacts per second between the first and the last record (start-up left out)."""
        return (self.count - 1) / max(1e-9, self.last - self.first) if self.count > 1 else 0.0


def _run_side(argv: list[str], out: str) -> tuple[float, int, float, float]:
    """Run one side; returns (wall seconds, peak tree RSS, steady artifacts/s, CPU seconds of
    the whole tree, start-up included: each process's user + system time when last seen, so
    Ray's processes count too, which the driver does not wait for)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak, lines, ticks = 0, _Lines(out), {}
    while proc.poll() is None:
        table = _proc_table()
        members = [p for p in _tree(proc.pid, table) if p in table]
        peak = max(peak, sum(table[p][1] for p in members))
        for p in members:
            ticks[p] = max(ticks.get(p, 0), table[p][2])
        lines.poll()
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    lines.poll()
    err = proc.stderr.read().decode(errors="replace")
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{err[-3000:]}")
    return wall, peak, lines.steady_rate(), sum(ticks.values()) / os.sysconf("SC_CLK_TCK")


def _mean_seconds(out: str) -> tuple[float, Counter]:
    total, n, verdicts = 0.0, 0, Counter()
    with open(out) as f:
        for line in f:
            r = json.loads(line)
            total += float(r.get("seconds") or 0)
            n += 1
            verdicts[r["verdict"]] += 1
    return total / max(1, n), verdicts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--convert", default="onnx")
    ap.add_argument("--target", default="torch==2.10")
    ap.add_argument("--sides", default="jobs1,jobs2,ray", help="which of jobs1,jobs2,ray to run")
    ap.add_argument("--keep", help="generate the fleet (and the results) here and keep them")
    ap.add_argument("--fleet", help="scan this folder (e.g. a sample of your registry) instead of generating one")
    args = ap.parse_args(argv)
    work = args.keep or tempfile.mkdtemp(prefix="pt2x-bench-scan-")
    try:
        if args.fleet:
            from pt2x.tools.scan.discover import discover

            fleet, args.count = args.fleet, len(discover([args.fleet]))
            print(f"fleet: {args.count} artifacts in {fleet}")
        else:
            fleet = os.path.join(work, "fleet")
            t0 = time.perf_counter()
            kinds = make_fleet(fleet, args.count, args.seed)
            print(f"fleet: {args.count} artifacts in {time.perf_counter() - t0:.1f} s: "
                  + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
        base = [sys.executable, "-m", "pt2x", "scan", fleet, "--convert", args.convert, "--target", args.target, "--json"]
        sides = {"jobs1": ["--jobs", "1"], "jobs2": ["--jobs", "2"], "ray": ["--ray", "--jobs", "2"]}
        rows = []
        for name in args.sides.split(","):
            out = os.path.join(work, f"results-{name}.jsonl")
            if os.path.exists(out):
                os.unlink(out)
            wall, peak, steady, cpu = _run_side(base + sides[name] + ["--out", out], out)
            mean, verdicts = _mean_seconds(out)
            rows.append((name, wall, peak, steady, mean, cpu, verdicts))
        print(f"\n{'side':<6} {'wall s':>7} {'artifacts/s':>12} {'steady/s':>9} {'peak tree RSS MiB':>18} "
              f"{'check ms':>9} {'CPU s':>7} {'CPU ms/artifact':>16}  verdicts")
        for name, wall, peak, steady, mean, cpu, verdicts in rows:
            print(f"{name:<6} {wall:7.1f} {args.count / wall:12.1f} {steady:9.1f} {peak / 2**20:18.0f} {mean * 1000:9.2f} "
                  f"{cpu:7.1f} {cpu / args.count * 1000:16.2f}  " + ", ".join(f"{k} {n}" for k, n in sorted(verdicts.items())))
        first = rows[0]
        for name, wall, _, steady, *_ in rows[1:]:
            print(f"{name} vs {first[0]}: {first[1] / wall:.2f}x the throughput, {steady / first[3]:.2f}x steady")
        cpus = {"jobs1": 1, "jobs2": 2, "ray": 2}
        per_cpu = {name: cpus[name] / steady for name, _, _, steady, *_ in rows if steady}
        print("\nartifacts/s: whole run, start-up included; steady/s: between the first and the last record;"
              " check ms: the workers' own wall time per artifact; CPU s: user+system of the side's whole"
              " process tree, start-up included")
        for name, cost in per_cpu.items():
            print(f"measured cost per artifact per CPU, {name}: {cost * 1000:.1f} ms "
                  f"(a cluster of C CPUs: about C / {cost:.4f} artifacts/s once started)")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
