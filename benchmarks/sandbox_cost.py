"""Sandbox cost: one command in the eval sandbox (bubblewrap, every namespace, prlimit) vs the same command bare
(claim: median <= 10 ms more).

``/bin/true`` and ``python -c pass`` (the system's Python, bound read-only inside), ``--rounds`` each, bare and
sandboxed interleaved so drift hits both alike; a sandbox with ``network="proxy"`` (its forwarder started before the
command) is timed alongside for ``/bin/true``, not part of the claim. Prints each median with its p10/p90 spread,
the difference in ms and the ratio.

    .venv/bin/python benchmarks/sandbox_cost.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from labbot.evals.sandbox.bwrap import Limits, Sandbox, SandboxSpec  # noqa: E402

CLAIM_MS = 10.0
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else os.path.realpath(sys.executable)
COMMANDS = {"/bin/true": ["/bin/true"], "python -c pass": [PYTHON, "-c", "pass"]}


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def spread(xs: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(xs, n=10)
    return statistics.median(xs), q[0], q[-1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    a = ap.parse_args()
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        spec = SandboxSpec(Path(tmp), limits=Limits(timeout_s=60))
        with Sandbox(spec) as box, Sandbox(SandboxSpec(Path(tmp), network="proxy", allow_hosts=("pypi.org",))) as px:
            for cmd in COMMANDS.values():  # warm up the page cache
                subprocess.run(cmd, check=True)
                assert box.exec(cmd).success
            for _ in range(a.rounds):
                for name, cmd in COMMANDS.items():
                    samples.setdefault(f"{name} bare", []).append(timed(lambda c=cmd: subprocess.run(c, check=True)))
                    samples.setdefault(f"{name} sandbox", []).append(timed(lambda c=cmd: box.exec(c)))
                samples.setdefault("/bin/true sandbox+proxy", []).append(timed(lambda: px.exec(["/bin/true"])))
    print(f"{a.rounds} rounds, interleaved; ms: median (p10 .. p90)")
    for name, xs in samples.items():
        med, p10, p90 = spread(xs)
        print(f"  {name:<28}{med:8.2f}  ({p10:.2f} .. {p90:.2f})")
    result: dict[str, float] = {}
    worst = 0.0
    for name in COMMANDS:
        bare, boxed = statistics.median(samples[f"{name} bare"]), statistics.median(samples[f"{name} sandbox"])
        diff, ratio = boxed - bare, boxed / bare
        worst = max(worst, diff)
        print(f"{name}: sandbox - bare = {diff:+.2f} ms, sandbox / bare = {ratio:.2f}")
        key = "true" if name == "/bin/true" else "python"
        result |= {f"{key}_bare_ms": bare, f"{key}_sandbox_ms": boxed, f"{key}_diff_ms": diff, f"{key}_ratio": ratio}
    proxy = statistics.median(samples["/bin/true sandbox+proxy"]) - statistics.median(samples["/bin/true bare"])
    print(f"/bin/true with network=proxy: {proxy:+.2f} ms over bare (the forwarder's start; not claimed)")
    ok = worst <= CLAIM_MS
    print(f"claim (median sandbox - bare <= {CLAIM_MS:g} ms): {'pass' if ok else 'FAIL'}")
    result |= {"proxy_diff_ms": proxy, "ratio": result["python_ratio"]}
    print(json.dumps({"benchmark": "sandbox_cost", **result, "claim": "sandbox <= bare + 10 ms", "ok": ok}))


if __name__ == "__main__":
    main()
