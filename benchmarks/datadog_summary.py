"""Datadog summary: a 100,000-point metric series summarised for a model by the ``datadog`` MCP server (claim: the
text the model gets is at least 20× smaller than Datadog's raw payload, and the spike survives).

Measured in one run, against the Datadog fake (tests/fakes/datadog/) in process and a real artifact store:

* ``summarise_timeseries`` alone on the parsed answer (median of ``--rounds``);
* the ``query_metrics`` tool end to end through ``mcp.Client`` in memory — VendorApi's request to the fake (which
  checks it against the spec and answers), parse, summary, and the full payload stored through
  ``/api/v1/artifacts`` — beside the bare library doing only the fetch (httpx GET to the same fake +
  ``json.loads``), as a ratio;
* bytes returned to the model vs the raw payload, as a ratio.

    .venv/bin/python benchmarks/datadog_summary.py [--points 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import tempfile
import time
from pathlib import Path

import httpx
from _harness import median, report
from fakes.datadog import API_KEY, APP_KEY, DatadogFake
from mcp import Client
from support import make_service

from labbot.bot.api import create_app
from labbot.mcp_servers.datadog import DatadogApi, build_server, summarise_timeseries
from labbot.mcp_servers.lab import LabApi
from labbot.storage.artifacts import ArtifactStore
from labbot.training.ray_cluster import RayConnection
from labbot.training.telemetry_store import TelemetryStore

QUERY = "max:trainer.grad_norm{run:bench}"
CLAIM = 20.0


def seeded_fake(points: int, now: float) -> tuple[DatadogFake, float]:
    """A fake holding one series of ``points`` points over the hour before ``now``, with one spike."""
    fake = DatadogFake(clock=lambda: now)
    rng = random.Random(7)
    start_ms, step_ms = (now - 3600) * 1000, 3_600_000 / points
    value, series = 1.0, []
    for i in range(points):
        value = max(0.0, value + rng.gauss(0, 0.01))
        series.append([round(start_ms + i * step_ms), round(value, 6)])
    spike = 1000.0 + rng.random()
    series[rng.randrange(points)][1] = spike
    fake.add_series("trainer.grad_norm", series, scope="run:bench")
    return fake, spike


def main() -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # MCPServer sets INFO; one line per request is noise
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    now = float(int(time.time()))
    fake, spike = seeded_fake(a.points, now)
    params: dict[str, str | int] = {"from": int(now) - 3600, "to": int(now), "query": QUERY}
    keys = {"DD-API-KEY": API_KEY, "DD-APPLICATION-KEY": APP_KEY}

    with tempfile.TemporaryDirectory(prefix="lb-bench-datadog-") as tmp:
        service = make_service(Path(tmp), RayConnection("http://127.0.0.1:9", None))
        store = ArtifactStore(service.db, str(Path(tmp) / "artifacts"))
        app = create_app(service, TelemetryStore(service.db), admin_token="t0ken", artifacts=store)
        lab = LabApi("http://labbot.test", "t0ken", agent="bench", transport=httpx.ASGITransport(app=app))
        api = DatadogApi(API_KEY, APP_KEY, transport=fake.transport(), clock=lambda: now, env={})
        server = build_server(api, artifacts=lab)

        async def run() -> tuple[list[float], list[float], list[float], str, bytes]:
            bare: list[float] = []
            tool: list[float] = []
            alone: list[float] = []
            text, raw = "", b""
            async with (
                Client(server) as client,
                httpx.AsyncClient(transport=fake.transport(), base_url="http://dd.test", headers=keys) as http,
            ):
                for i in range(a.rounds + 1):  # the first round warms up (spec loaded, SQL compiled)
                    start = time.perf_counter()
                    r = await http.get("/api/v1/query", params=params)
                    doc = json.loads(r.content)
                    fetched = time.perf_counter()
                    summarise_timeseries(doc)
                    summarised = time.perf_counter()
                    result = await client.call_tool("query_metrics", {"query": QUERY})
                    done = time.perf_counter()
                    if result.is_error:
                        raise SystemExit(f"query_metrics failed: {result.content}")
                    if i:
                        bare.append(fetched - start)
                        alone.append(summarised - fetched)
                        tool.append(done - summarised)
                    text, raw = "".join(getattr(c, "text", "") for c in result.content), r.content
            return bare, alone, tool, text, raw

        bare, alone, tool, text, raw = asyncio.run(run())
        stored = store.list("bench")
        service.db.dispose()
    if fake.violations:
        raise SystemExit(f"the fake saw requests Datadog would refuse: {fake.violations}")
    returned = len(text.encode())
    ratio = len(raw) / returned
    spike_kept = f"max {spike:.6g}" in text
    ok = ratio >= CLAIM and spike_kept
    print(f"{a.points:,} points, median of {a.rounds} rounds")
    print(f"summarise_timeseries alone:           {median(alone) * 1000:8.1f} ms")
    print(f"httpx GET + json.loads (bare):        {median(bare) * 1000:8.1f} ms")
    print(
        f"query_metrics tool (fetch, summary, artifact, MCP): {median(tool) * 1000:8.1f} ms "
        f"({median(tool) / median(bare):.2f}x the bare fetch)"
    )
    print(f"raw payload {len(raw):,} bytes, returned to the model {returned:,} bytes")
    print(
        f"ratio raw/returned = {ratio:,.0f}x  (claim >= {CLAIM:g}x: {'holds' if ratio >= CLAIM else 'does NOT hold'}); "
        f"spike max {spike:.6g} in the summary: {'yes' if spike_kept else 'NO'}; {len(stored)} payload artifact(s)"
    )
    report(
        "datadog_summary",
        {
            "points": a.points,
            "summarise_s": median(alone),
            "bare_fetch_s": median(bare),
            "tool_s": median(tool),
            "tool_vs_bare": median(tool) / median(bare),
            "raw_bytes": len(raw),
            "returned_bytes": returned,
            "ratio": ratio,
            "spike_kept": spike_kept,
            "claim": f">= {CLAIM:g}x raw/returned, spike kept",
            "ok": ok,
        },
    )


if __name__ == "__main__":
    main()
