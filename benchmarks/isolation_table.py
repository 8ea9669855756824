"""Isolation score on the seal's fixture suite: the probe battery in a sealed sandbox (no network, and again with
``network="proxy"``) and in a naive setup (a plain copy of the checkout, its history and leftovers included, run as a
plain subprocess with the host's environment and a developer venv holding an editable install of the checkout),
side by side, so the table shows what each layer closes (claim: sealed 100 %).

The fixture (``tests/evals/seal_repo.py``) is a tiny package with two commits, a deleted function and a canary; the
host side has a fake labbot home (database, token file), a Ray temp dir with a live socket and a listening port, a
token in the environment, and whatever ports this host listens on. Network targets are the defaults (1.1.1.1,
pypi.org, example.com/.org): what this machine can reach is what the naive column shows. Every cell is a real run.

    .venv/bin/python benchmarks/isolation_table.py
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "evals")]

import seal_repo  # noqa: E402

from labbot.evals.sandbox.bwrap import SandboxSpec  # noqa: E402
from labbot.evals.seal.leak_probes import HostSurface, naive_copy, run_probes, run_probes_naive  # noqa: E402
from labbot.evals.seal.report import IsolationReport  # noqa: E402

TOKEN = "xoxb-" + "1111111111-2222222222-" + "abcdefABCDEF"


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="lb-isolation-") as tmp:
        root = Path(tmp)
        seal = seal_repo.build(root / "fixture")
        home = root / "labbot-home"
        home.mkdir()
        (home / "labbot.db").write_bytes(b"SQLite format 3\x00")
        (home / "slack.token").write_text(TOKEN)
        ray = root / "ray" / "session_latest" / "sockets"
        ray.mkdir(parents=True)
        with socket.socket(socket.AF_UNIX) as raylet, socket.socket() as gcs:
            raylet.bind(str(ray / "raylet"))
            raylet.listen()
            gcs.bind(("127.0.0.1", 0))
            gcs.listen()
            host = HostSurface(
                files=[home, home / "labbot.db", home / "slack.token", seal.original],
                ray_sockets=[root / "ray", ray / "raylet"],
                ray_ports=[gcs.getsockname()[1]],
                secrets=[TOKEN],
            )
            needles = seal.needles()
            os.environ["SLACK_BOT_TOKEN"] = TOKEN  # labbot's process holds it
            columns: dict[str, IsolationReport] = {}
            took: dict[str, float] = {}
            start = time.perf_counter()
            columns["sealed"] = run_probes(SandboxSpec(seal.task_repo), needles, host=host)
            took["sealed"] = time.perf_counter() - start
            start = time.perf_counter()
            proxied = SandboxSpec(seal.task_repo, network="proxy", allow_hosts=("pypi.org",))
            columns["sealed+proxy"] = run_probes(proxied, needles, host=host)
            took["sealed+proxy"] = time.perf_counter() - start
            workspace = naive_copy(seal.checkout, seal.task_repo, root / "naive")
            venv = seal_repo.make_venv(root / "dev-venv", {"__editable__.mathpkg.pth": f"{seal.checkout}\n"})
            start = time.perf_counter()
            columns["naive"] = run_probes_naive(workspace, needles, python=str(venv / "bin" / "python"), host=host)
            took["naive"] = time.perf_counter() - start
    names = [(p.name, p.category) for p in columns["sealed"].probes]
    width = max(len(n) for n, _ in names) + 2
    print(f"{'probe':<{width}}{'category':<11}" + "".join(f"{c:<14}" for c in columns))
    for i, (name, category) in enumerate(names):
        cells = "".join(f"{'pass' if r.probes[i].passed else 'FAIL':<14}" for r in columns.values())
        print(f"{name:<{width}}{category:<11}{cells}")
    print(
        f"{'score':<{width}}{'':<11}"
        + "".join(f"{f'{sum(p.passed for p in r.probes)}/{len(r.probes)} {r.score:.0%}':<14}" for r in columns.values())
    )
    print(f"{'battery time':<{width}}{'':<11}" + "".join(f"{f'{t:.2f} s':<14}" for t in took.values()))
    print("\nevidence of what the naive setup leaked:")
    for p in columns["naive"].failed():
        print(f"  {p.name}: {p.evidence[:160]}")
    ok = columns["sealed"].sealed and columns["sealed+proxy"].sealed
    print(f"claim (sealed score 100 %, both network modes): {'pass' if ok else 'FAIL'}")
    result = {f"{c}_score": r.score for c, r in columns.items()} | {f"{c}_s": t for c, t in took.items()}
    print(json.dumps({"benchmark": "isolation_table", **result, "claim": "sealed isolation 100 %", "ok": ok}))


if __name__ == "__main__":
    main()
