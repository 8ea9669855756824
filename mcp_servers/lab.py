"""The ``lab`` MCP server: labbot itself as tools — runs, their metrics and logs, pages — and the actions on them
(launch, stop, restart, acknowledge), which are ``destructiveHint`` and so run only after a human approves; the
agent's own artifact store (list, put, get, share: ``/api/v1/artifacts``); and evals (``/api/v1/evals``: suites,
results; generating a suite and running one start labbot runs, so they need approval like a launch). The eval reads
are for the agent's researcher (``?by=``): only the suites they may run and those suites' runs. Putting and
sharing only add to the agent's own store, so they are not destructive. The agent is ``LabApi(agent=...)``, else
``LABBOT_AGENT``, else ``agent``: one server process speaks for one agent's store.

Like the ``labbot`` CLI, and through the same client (:mod:`labbot.common.api_client`), it is a client of the
running control plane's ``/api/v1`` (URL from ``LABBOT_PUBLIC_URL`` / ``LABBOT_PORT``, admin token from
``LABBOT_HOME/admin_token``), so every front door goes through the same service layer, and the same server serves
labbot's own agents and an outside MCP client (Cursor, Claude Desktop: ``labbot mcp lab`` over stdio, or ``--http
PORT`` with a bearer token); labbot's own agents reach the app in process, not over the network
(``labbot.bot.api.in_process``: an ASGI transport and no token of their own). Imports nothing from bot/ or agents/.
Answers are compact text a model can read; metric series are summarised (downsampled, with min/max/last).
``wait_for_run`` waits (polling) until a run has ended; its ``_meta`` marks it as a wait on the cluster
(:mod:`labbot.common.mcp_meta`), so labbot's agents are not charged for it.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import math
import mimetypes
import os
import time
from typing import Annotated, Any, Literal

import httpx
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from labbot.common import api_client
from labbot.common.api_client import NO_ADMIN_TOKEN, ApiError, AsyncApiClient
from labbot.common.durations import format_duration
from labbot.common.experiment_text import experiment_text, plan_text
from labbot.common.humanize import format_bytes
from labbot.common.mcp_meta import WAITS, previewed_by
from labbot.common.research_text import plan_text as research_plan_text
from labbot.common.research_text import research_text
from labbot.mcp_servers.annotations import ADD, READ, WRITE

MAX_POINTS = 60
MAX_LOG_LINES = 400
ENDED = ("succeeded", "failed", "stopped")  # a run's statuses once it has ended (the run JSON contract)
DEFAULT_RUN_WAIT_S, MAX_RUN_WAIT_S = 600, 3600  # wait_for_run: how long by default, and at most
RUN_POLL_S = 2.0  # how often wait_for_run looks
MAX_ARTIFACT_TEXT = 64 * 1024  # what get_artifact returns at most, in bytes of the artifact
AGENT_ENV = "LABBOT_AGENT"
DEFAULT_AGENT = "agent"
_TEXTUAL = {"application/json", "application/xml", "application/yaml", "application/toml", "application/x-yaml"}

# ``as_agent``: which agent a call is for. labbot sets it for its own agents (one server speaks for them all); an
# outside client leaves it out and is ``LabApi.agent``. One declaration for each thing it names.
_AS_AGENT = "(set by labbot for its own agents; leave it out)"
Launcher = Annotated[str | None, Field(description=f"who launches {_AS_AGENT}")]
StoreOwner = Annotated[str | None, Field(description=f"whose store {_AS_AGENT}")]
Reader = Annotated[str | None, Field(description=f"for whom {_AS_AGENT}")]


class LabApi(AsyncApiClient):
    """The control plane's ``/api/v1`` (:class:`~labbot.common.api_client.AsyncApiClient`) for the tools: its
    errors become tool errors that say what to do, and it knows whose artifact store the artifact tools use.

    Args:
        url: the control plane (default: LABBOT_PUBLIC_URL, else http://127.0.0.1:LABBOT_PORT).
        token: the admin token (default: read from LABBOT_HOME/admin_token on each call; ``""``: none sent, for a
            transport that vouches for its requests itself).
        agent: whose artifact store the artifact tools use (default: LABBOT_AGENT, else "agent").
        transport: the httpx transport (default: the network; tests pass ``httpx.ASGITransport(app)``, and
            ``labbot serve`` gives its own agents a door into its app: ``labbot.bot.api.in_process``).
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        agent: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(url, token, timeout=timeout, transport=transport)
        self.agent = agent or os.environ.get(AGENT_ENV) or DEFAULT_AGENT

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await super().request(method, path, **kwargs)
        except ApiError as e:
            raise tool_error(e) from None

    async def read(self, path: str, limit: int, **kwargs: Any) -> tuple[bytes, httpx.Headers, bool]:
        try:
            return await super().read(path, limit, **kwargs)
        except ApiError as e:
            raise tool_error(e) from None


def tool_error(e: ApiError) -> ToolError:
    """The API client's error as the tool's: the API's message, or that labbot is not running and how to start it."""
    if e.code == NO_ADMIN_TOKEN:
        return ToolError(f"labbot is not running here ({e.message}): start `labbot serve` first")
    return ToolError(e.message)


def launcher_of(agent: str) -> str:
    """Who owns a run an agent launches: the researcher it works for (``RESEARCHER/ROLE``, labbot's own agents), so
    the run's approvals and thread follow them; ``agent`` for an outside client, which has no researcher."""
    researcher, slash, _role = agent.partition("/")
    return researcher if slash and researcher else DEFAULT_AGENT


def viewer_params(agent: str) -> dict[str, str]:
    """Whom an agent reads evals for: its researcher (``RESEARCHER/ROLE``) as ``?by=``, so it sees only the suites
    and eval runs they may (the API's rule); an outside client, which has no researcher, reads as the admin-token
    holder it was given the token by."""
    researcher, slash, _role = agent.partition("/")
    return {"by": researcher} if slash and researcher else {}


def run_line(r: dict[str, Any]) -> str:
    """One run for a model: id, job, status, attempt, step, its headline metric's latest value (loss unless its job
    names another), owner."""
    headline = r.get("headline") or "loss"
    value = (r.get("metrics") or {}).get(headline)
    bits = [f"{r['id']}", r["job"], r["status"], f"attempt {r['attempt']}", f"step {r.get('step')}"]
    if value is not None:
        bits.append(f"{headline} {value}")
    bits.append(f"owner {r['owner']}")
    return " · ".join(str(b) for b in bits)


def _sample_line(s: dict[str, Any]) -> str:
    """``t01-area: pass · 3.5s · 1,200 tokens``: an eval sample's result, time and tokens."""
    verdict = "pass" if s.get("passed") else "unjudged" if s.get("verdict") == "unjudged" else "fail"
    bits = [f"{s['task']}: {verdict}"]
    if isinstance(s.get("time_s"), int | float):
        bits.append(format_duration(s["time_s"]))
    if isinstance(s.get("tokens"), int) and s["tokens"]:
        bits.append(f"{s['tokens']:,} tokens")
    return " · ".join(bits)


def summarise_series(points: list[list[Any]], max_points: int = MAX_POINTS) -> str:
    """A metric series a model can read: count, first/last, min/max, and at most ``max_points`` (step, value)
    pairs (each the last of its bucket, so spikes show in min/max even when cut)."""
    if not points:
        return "no points yet"
    values = [v for _, v in points if isinstance(v, int | float) and math.isfinite(v)]
    odd = [(s, v) for s, v in points if not (isinstance(v, int | float) and math.isfinite(v))]
    head = f"{len(points)} points, steps {points[0][0]}..{points[-1][0]}, first {points[0][1]}, last {points[-1][1]}"
    if values:
        head += f", min {min(values):.6g}, max {max(values):.6g}"
    if odd:
        head += f"; non-finite at steps {', '.join(str(s) for s, _ in odd[:10])}"
    step = max(1, math.ceil(len(points) / max_points))
    sample = points[step - 1 :: step]
    if sample[-1] is not points[-1]:
        sample.append(points[-1])
    return head + "\n" + "\n".join(f"{s}\t{v}" for s, v in sample)


def _checked(kind: str, the_id: str) -> str:
    """``the_id`` when it is a ``kind`` id, else a tool error (before any request)."""
    try:
        return api_client.check_id(kind, the_id)
    except ApiError as e:
        raise tool_error(e) from None


def _path(kind: str, the_id: str, *rest: str) -> str:
    """The path of a run, page or artifact (``kind``), built by the one client's helper: a model-written id like
    ``../audit#`` or ``r1/stop?`` is refused before any request, as a tool error, and every segment is escaped, so no
    argument reaches another route (share is a POST that needs no approval; ack must not become a stop)."""
    build = {"run": api_client.run_path, "page": api_client.page_path, "artifact": api_client.artifact_path}[kind]
    try:
        return build(the_id, *rest)
    except ApiError as e:
        raise tool_error(e) from None


def _artifact_line(a: dict[str, Any], agent: str) -> str:
    bits = [a["id"], a["name"], format_bytes(a["size"]), a["content_type"]]
    if a["owner_agent"] != agent:
        bits.append(f"shared by {a['owner_agent']}")
    elif a.get("shared_with"):
        bits.append(f"shared with {', '.join(a['shared_with'])}")
    return " · ".join(bits)


def _is_text(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind.startswith("text/") or kind in _TEXTUAL or kind.endswith(("+json", "+xml"))


def _text_type(name: str) -> str:
    """The content type of text an agent stores as ``name``: its textual type by extension, else text/plain."""
    guess = mimetypes.guess_type(name)[0]
    return f"{guess if guess and _is_text(guess) else 'text/plain'}; charset=utf-8"


def _decode(data: bytes, content_type: str) -> str | None:
    """The bytes as text, or None when they are not text (a binary content type, or NUL bytes in them)."""
    if b"\x00" in data:
        return None
    charset = "utf-8"
    for param in content_type.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip('"')
    try:
        decoder = codecs.getincrementaldecoder(charset)(errors="replace")
    except LookupError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    if not _is_text(content_type) and "\ufffd" in decoder.decode(data[:4096]):
        return None  # declared binary and does not read as text either
    decoder.reset()
    return decoder.decode(data)  # not final: a character cut at the end is dropped, not shown as garbage


def build_server(api: LabApi | None = None) -> MCPServer:
    """The server, its tools added by concept (each ``_add_*`` registers a few); ``api`` defaults to ``LabApi()``."""
    lab = api or LabApi()
    server: MCPServer = MCPServer(
        "labbot-lab",
        instructions="labbot's runs, metrics, logs and pages, and your artifact store. Launching, stopping, "
        "restarting and acknowledging change things: a human approves each such call.",
    )
    # in this order: the order of the tool list agents see
    for add in (
        _add_reads,
        _add_actions,
        _add_experiment_tools,
        _add_research_tools,
        _add_artifact_tools,
        _add_eval_suite_tools,
        _add_eval_run_tools,
    ):
        add(server, lab)
    return server


def _launcher(lab: LabApi, as_agent: str | None) -> str:
    return launcher_of(as_agent or lab.agent)


def _viewer(lab: LabApi, as_agent: str | None) -> dict[str, str]:
    return viewer_params(as_agent or lab.agent)


def _add_reads(server: MCPServer, lab: LabApi) -> None:
    """Runs, their metrics and logs, and pages: read only."""

    @server.tool(annotations=READ, structured_output=False)
    async def list_runs(
        status: Annotated[str | None, Field(description="only runs in this status, e.g. running")] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
    ) -> str:
        """Runs, newest first: id, job, status, attempt, step, the latest value of its headline metric (loss unless
        its job names another, e.g. pass_rate), owner."""
        params: dict[str, Any] = {"limit": limit}
        if status:
            params["status"] = status
        runs = (await lab.json("GET", "/runs", params=params))["runs"]
        return "\n".join(run_line(r) for r in runs) or "no runs"

    @server.tool(annotations=READ, structured_output=False)
    async def get_run(run_id: str) -> str:
        """One run in full (JSON): status, attempt, step, latest metrics, checkpoint, parameters, timestamps, error."""
        return json.dumps((await lab.json("GET", _path("run", run_id)))["run"], indent=1)

    @server.tool(annotations=READ, meta=WAITS, structured_output=False)
    async def wait_for_run(
        run_id: str,
        timeout_s: Annotated[
            int, Field(ge=1, le=MAX_RUN_WAIT_S, description="how long to wait at most, in seconds")
        ] = DEFAULT_RUN_WAIT_S,
    ) -> str:
        """Wait until a run has ended (succeeded, failed or stopped), or timeout_s: then its line. Use it after
        launching a run whose result you need (an eval-generate or eval run); the wait is not charged to you."""
        path = _path("run", run_id)
        deadline = time.monotonic() + timeout_s
        while True:
            run = (await lab.json("GET", path))["run"]
            if run["status"] in ENDED:
                error = f" · error: {run['error']}" if run.get("error") and run["status"] == "failed" else ""
                return f"ended: {run_line(run)}{error}"
            left = deadline - time.monotonic()
            if left <= 0:
                waited = format_duration(timeout_s)
                return f"still {run['status']} after {waited}: {run_line(run)} (wait_for_run again to keep waiting)"
            await asyncio.sleep(min(RUN_POLL_S, left))

    @server.tool(annotations=READ, structured_output=False)
    async def run_metrics(
        run_id: str, name: Annotated[str, Field(description="a metric name, e.g. loss or tokens_per_s")] = "loss"
    ) -> str:
        """A metric's series for a run, summarised: count, min/max/last and up to 60 (step, value) samples."""
        doc = await lab.json("GET", _path("run", run_id, "metrics", name))
        return f"{name} of run {run_id}: " + summarise_series(doc["points"])

    @server.tool(annotations=READ, structured_output=False)
    async def run_logs(run_id: str, tail: Annotated[int, Field(ge=1, le=MAX_LOG_LINES)] = 100) -> str:
        """The last lines of the run's current attempt's logs (from Ray)."""
        text = (await lab.request("GET", _path("run", run_id, "logs"), params={"tail": tail})).text
        return text or "(no output yet)"

    @server.tool(annotations=READ, structured_output=False)
    async def list_pages(include_resolved: bool = False, run_id: str | None = None) -> str:
        """Pages (stalls, failures, divergence, the cluster down): id, kind, run, state, escalation level, summary."""
        params: dict[str, Any] = {"all": "1"} if include_resolved else {}
        if run_id:
            params["run"] = _checked("run", run_id)
        pages = (await lab.json("GET", "/pages", params=params))["pages"]
        return (
            "\n".join(
                f"{p['id']} · {p['kind']} · run {p.get('run_id') or '(cluster)'} · {p['state']} · level "
                f"{p['escalation_level']} · {p['summary']}"
                for p in pages
            )
            or "no pages"
        )


def _add_actions(server: MCPServer, lab: LabApi) -> None:
    """Launching, stopping and restarting runs, acknowledging pages: each needs a human's approval."""

    @server.tool(annotations=WRITE, structured_output=False)
    async def launch_run(
        job: str,
        params: Annotated[dict[str, Any] | None, Field(description='job parameters, e.g. {"steps": 200}')] = None,
        stall_after: Annotated[str | None, Field(description="e.g. 10m")] = None,
        alerts: Annotated[
            list[str] | None, Field(description="metric alerts, e.g. ['pass_rate below 0.2 for 10m']")
        ] = None,
        remedies: Annotated[
            list[str] | None,
            Field(
                description="instead of paging on a finding, roll back to the last good checkpoint and restart with "
                "changed parameters, e.g. ['kl_blowup: lr *= 0.1; max 2'] (the job's declared parameters only)"
            ),
        ] = None,
        as_agent: Launcher = None,
        purpose: Annotated[
            str | None,
            Field(description="training, eval, data, research or serving (default: the job's); its cap applies"),
        ] = None,
    ) -> str:
        """Launch a job on Ray (needs a human's approval). Over its purpose's cap it waits queued."""
        body: dict[str, Any] = {"job": job, "params": params or {}, "owner": _launcher(lab, as_agent)}
        if stall_after:
            body["stall_after"] = stall_after
        if alerts:
            body["alerts"] = alerts
        if remedies:
            body["remedies"] = remedies
        if purpose:
            body["purpose"] = purpose
        doc = await lab.json("POST", "/runs", json=body)
        run = doc["run"]
        if doc.get("queued"):
            return f"queued (not on Ray yet): {run_line(run)}; {doc['queued']}"
        return f"launched: {run_line(run)}"

    @server.tool(annotations=WRITE, structured_output=False)
    async def stop_run(run_id: str) -> str:
        """Stop a run (needs a human's approval). Its checkpoints are kept."""
        run = (await lab.json("POST", _path("run", run_id, "stop"), params={"by": "agent"}))["run"]
        return f"stopped: {run_line(run)}"

    @server.tool(annotations=WRITE, structured_output=False)
    async def restart_run(run_id: str) -> str:
        """Restart a run from its newest checkpoint as a new attempt (needs a human's approval)."""
        run = (await lab.json("POST", _path("run", run_id, "restart"), params={"by": "agent"}))["run"]
        return f"restarted: {run_line(run)}"

    @server.tool(annotations=WRITE, structured_output=False)
    async def ack_page(page_id: str) -> str:
        """Acknowledge a page so its escalation stops (needs a human's approval)."""
        page = (await lab.json("POST", _path("page", page_id, "ack"), params={"by": "agent"}))["page"]
        return f"page {page['id']} is {page['state']}"


def _experiment_body(
    lab: LabApi,
    as_agent: str | None,
    job: str,
    space: dict[str, Any],
    metric: str,
    goal: str | None,
    trials: int | None,
    concurrency: int,
    seeds: int,
    search: str,
    prune: str,
    budget: str | None,
    name: str | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "job": job, "space": space, "metric": metric, "concurrency": concurrency, "seeds": seeds, "search": search,
        "prune": prune, "owner": _launcher(lab, as_agent),
    }  # fmt: skip
    for key, value in (("goal", goal), ("trials", trials), ("budget", budget), ("name", name)):
        if value is not None:
            body[key] = value
    return body


ExpSpace = Annotated[
    dict[str, Any],
    Field(
        description='the search space, one entry per job parameter: "loguniform(1e-4,1e-2)", "uniform(0,0.3)", '
        '"int(100,1000)", "choice(64,128)", a list [64, 128] (what a grid walks), or one value (fixed)'
    ),
]
ExpMetric = Annotated[str, Field(description="the objective: a metric the job reports, e.g. loss")]
ExpGoal = Annotated[str | None, Field(description="min or max (default: by the metric's name)")]
ExpTrials = Annotated[int | None, Field(ge=1, le=500, description="configs to try (default: the grid, else 20)")]
ExpConcurrency = Annotated[int, Field(ge=1, le=64, description="trials running at once")]
ExpSeeds = Annotated[int, Field(ge=1, le=20, description="runs of each config, one per seed")]
ExpSearch = Annotated[Literal["grid", "random", "tpe", "cmaes"], Field(description="the sampler")]
ExpPrune = Annotated[Literal["asha", "hyperband", "median", "none"], Field(description="early stopping")]
ExpBudget = Annotated[str | None, Field(description="GPU- or CPU-hours, e.g. 2gpu-h or 10cpu-h")]


def _add_experiment_tools(server: MCPServer, lab: LabApi) -> None:
    """Experiments: planned (read only), run (one approval for every trial), read, stopped (its owner approves)."""

    @server.tool(annotations=READ, structured_output=False)
    async def plan_experiment(
        job: str,
        space: ExpSpace,
        metric: ExpMetric,
        goal: ExpGoal = None,
        trials: ExpTrials = None,
        concurrency: ExpConcurrency = 2,
        seeds: ExpSeeds = 1,
        search: ExpSearch = "tpe",
        prune: ExpPrune = "none",
        budget: ExpBudget = None,
        name: str | None = None,
        as_agent: Launcher = None,
    ) -> str:
        """What run_experiment with these arguments would run and cost (trials, runs, projected CPU/GPU-hours against
        the budget); starts nothing. A bad space, metric or budget is refused here with what would be right."""
        body = _experiment_body(
            lab, as_agent, job, space, metric, goal, trials, concurrency, seeds, search, prune, budget, name
        )
        return plan_text((await lab.json("POST", "/experiments/plan", json=body))["plan"])

    @server.tool(annotations=WRITE, structured_output=False, meta=previewed_by("plan_experiment"))
    async def run_experiment(
        job: str,
        space: ExpSpace,
        metric: ExpMetric,
        goal: ExpGoal = None,
        trials: ExpTrials = None,
        concurrency: ExpConcurrency = 2,
        seeds: ExpSeeds = 1,
        search: ExpSearch = "tpe",
        prune: ExpPrune = "none",
        budget: ExpBudget = None,
        name: str | None = None,
        as_agent: Launcher = None,
    ) -> str:
        """Start an experiment: a job swept over a search space, each config run once per seed, searched and pruned
        by Optuna within the trials limit and budget (needs a human's approval, once for every trial: the prompt
        shows the trials and projected cost). Returns its id; follow it with get_experiment."""
        body = _experiment_body(
            lab, as_agent, job, space, metric, goal, trials, concurrency, seeds, search, prune, budget, name
        )
        doc = (await lab.json("POST", "/experiments", json=body))["experiment"]
        return f"experiment {doc['id']} started: {doc['trials_limit']} trials; follow it with get_experiment"

    @server.tool(annotations=READ, structured_output=False)
    async def get_experiment(experiment_id: str) -> str:
        """An experiment: status, trials (done, running, pruned, queued, failed), budget used, each trial's params,
        score and runs, the configs ranked with 95 % intervals across seeds, and the verdict between the best two."""
        doc = (await lab.json("GET", _exp_path(experiment_id)))["experiment"]
        return experiment_text(doc)

    @server.tool(annotations=READ, structured_output=False)
    async def check_claims(
        text: Annotated[
            str,
            Field(
                description="your report, each number written [[VALUE | SOURCE]]: e.g. [[2.49 | run:k3xq7p "
                "metric:loss at:final]], [[2.41 | experiment:xk3q7pm best stat:low]], [[70% | eval:e1val1]]"
            ),
        ],
    ) -> str:
        """Check a report's numbers before you give it: each [[VALUE | SOURCE]] is recomputed from labbot's store (a
        run's metric at:final|STEP|min|max|last [window:N]; an experiment's trial:N or best with
        stat:mean|low|high|n, or count:done|pruned|…; an eval run's stat:pass_rate|low|high|passed|samples) and judged
        to the precision you wrote. Returns each claim's verdict, the corrected text, and the numbers you left unbound
        to a source."""
        doc = (await lab.json("POST", "/claims/check", json={"text": text}))["report"]
        lines = [f"{'all claims check' if doc['ok'] else 'NOT all claims check'}: {doc['counts']}"]
        for c in doc["claims"]:
            lines.append(f"{c['verdict']}: {c['value']} | {c['source']} — {c['why']}")
        if doc["unbound"]:
            lines.append(f"numbers bound to no source: {', '.join(doc['unbound'])}")
        lines += ["", "corrected text:", doc["corrected"]]
        return "\n".join(lines)

    @server.tool(annotations=READ, structured_output=False)
    async def search_findings(
        query: Annotated[str, Field(description="words of the question, e.g. 'tiny-lm learning rate loss'")] = "",
        limit: Annotated[int, Field(ge=1, le=50)] = 5,
    ) -> str:
        """What the lab already learned about a question, best match first: each finding's question, status
        (answered, incomplete, failed: failures are findings too), verdict and summary, their numbers checked
        against labbot's store when recorded. Read them before you plan, and cite them."""
        found = (await lab.json("GET", "/findings", params={"q": query, "limit": limit}))["findings"]
        if not found:
            return "no findings match" if query else "no findings yet"
        return "\n\n".join(
            f"{f['id']} · {f['status']} · {f['created_at'][:10]} · {f['question']}\n{f['verdict']}\n{f['summary']}"
            for f in found
        )

    @server.tool(annotations=ADD, structured_output=False)
    async def record_finding(
        question: str,
        verdict: Annotated[str, Field(description="the answer in a sentence, its numbers as [[VALUE | SOURCE]]")],
        summary: Annotated[str, Field(description="what supports it (Markdown), numbers as [[VALUE | SOURCE]]")],
        status: Annotated[Literal["answered", "incomplete", "failed"], Field(description="failures count too")],
        as_agent: Launcher = None,
    ) -> str:
        """Keep what you found so the next question starts from it. Its numbers are checked against labbot's store
        first (as check_claims does): a wrong or unsourced one refuses the finding, naming it."""
        body = {"question": question, "verdict": verdict, "summary": summary, "status": status,
                "owner": _launcher(lab, as_agent)}  # fmt: skip
        made = (await lab.json("POST", "/findings", json=body))["finding"]
        return f"recorded finding {made['id']} ({len(made['claims'])} claims checked)"

    @server.tool(annotations=WRITE, structured_output=False)
    async def stop_experiment(experiment_id: str) -> str:
        """Stop an experiment (needs its owner's approval): its running trials are stopped, nothing more starts,
        the study and every result so far are kept."""
        doc = (await lab.json("POST", _exp_path(experiment_id, "stop"), params={"by": "agent"}))["experiment"]
        return f"stopped: {doc['id']} ({doc['reason']})"


def _exp_path(exp_id: str, *rest: str) -> str:
    try:
        return api_client.api_path("experiments", api_client.check_id("experiment", exp_id), *rest)
    except ApiError as e:
        raise tool_error(e) from None


def _research_path(rid: str, *rest: str) -> str:
    try:
        return api_client.api_path("research", api_client.check_id("research", rid), *rest)
    except ApiError as e:
        raise tool_error(e) from None


DEFAULT_RESEARCH_WAIT_S = 900


def _for(lab: LabApi, as_agent: str | None) -> dict[str, str]:
    """``?for=``: the researcher one of labbot's agents works for (planning, acting and reporting on a question are
    its owner's agents' alone); nothing for an outside client, which holds the admin token."""
    researcher, slash, _role = (as_agent or lab.agent).partition("/")
    return {"for": researcher} if slash and researcher else {}


def _add_research_tools(server: MCPServer, lab: LabApi) -> None:
    """A research question: opened, planned (recorded, priced), started under one approval of exactly that plan,
    waited on (not charged), acted on within the plan, reported with every number checked."""

    @server.tool(annotations=ADD, structured_output=False)
    async def open_research(question: str, as_agent: Launcher = None) -> str:
        """Open a research question for the researcher you work for (they approve its plan). `/lab research` opens
        one itself and gives you its id: use that one."""
        body = {"question": question, "owner": _launcher(lab, as_agent)}
        doc = (await lab.json("POST", "/research", json=body))["research"]
        return f"research {doc['id']} opened: {doc['question']}"

    @server.tool(annotations=READ, structured_output=False)
    async def research_status(research_id: str) -> str:
        """A research question: status, its approved plan and any change waiting for approval, each arm's
        experiment (counts, best so far, budget used), and the report once given."""
        return research_text((await lab.json("GET", _research_path(research_id)))["research"])

    @server.tool(annotations=ADD, structured_output=False)
    async def propose_plan(
        research_id: str,
        hypothesis: str,
        arms: Annotated[
            list[dict[str, Any]],
            Field(
                description="the experiments, each {name, job, space, metric, goal?, trials?, concurrency?, seeds?, "
                "search?, prune?} as run_experiment takes them (no budget: the plan's is shared between arms)"
            ),
        ],
        decision_rule: Annotated[str, Field(description="how the answer is decided, e.g. the lowest mean loss wins")],
        budget: Annotated[str, Field(description="for the whole plan, e.g. 2gpu-h or 10cpu-h")],
        on_failure: Annotated[
            list[Literal["restart", "drop_trial", "stop_arm", "stop"]] | None,
            Field(description="what you may do about a failure without asking again"),
        ] = None,
        publish: Annotated[
            list[Literal["notion", "linear"]] | None,
            Field(description="where the answer goes besides the thread: a Notion page, Linear issues"),
        ] = None,
        as_agent: Launcher = None,
    ) -> str:
        """Record the plan of a research question and price it. Nothing starts: a new plan, or a change that costs
        more or reaches further than the approved one, waits for start_research (its owner approves). A change
        within the approved plan (an arm dropped, fewer trials, a smaller budget) applies at once."""
        body: dict[str, Any] = {"hypothesis": hypothesis, "arms": arms, "decision_rule": decision_rule,
                                "budget": budget}  # fmt: skip
        if on_failure is not None:
            body["on_failure"] = on_failure
        if publish is not None:
            body["publish"] = publish
        doc = await lab.json("POST", _research_path(research_id, "plan"), json=body, params=_for(lab, as_agent))
        research = doc["research"]
        text = research_plan_text(research)
        if doc["change"] == "needs_approval":
            return (
                f"{text}\n\nnothing started: call start_research(research_id={research_id!r}, "
                f"plan_hash={research['plan_hash']!r}) to ask for its approval"
            )
        if doc["change"] == "applied":
            return f"applied within the approved plan (no approval needed):\n{research_text(research)}"
        return f"unchanged: that is the approved plan\n{research_text(research)}"

    @server.tool(annotations=READ, structured_output=False)
    async def show_plan(research_id: str, plan_hash: str) -> str:
        """The plan waiting for approval under plan_hash: what it runs, its price, what it cannot undo and, for a
        change, what grows (what start_research's approval shows)."""
        path = _research_path(research_id, "plans", _checked("plan", plan_hash))
        return research_plan_text((await lab.json("GET", path))["research"])

    @server.tool(annotations=WRITE, structured_output=False, meta=previewed_by("show_plan"))
    async def start_research(research_id: str, plan_hash: str) -> str:
        """Start the plan proposed under plan_hash (needs the question's owner's approval; the prompt shows the plan
        and its price). Exactly that plan starts: if it changed since, nothing does. Then wait_for_research."""
        path = _research_path(research_id, "plans", _checked("plan", plan_hash), "start")
        doc = (await lab.json("POST", path, params={"by": "approval"}))["research"]
        return f"started plan {plan_hash}:\n{research_text(doc)}"

    @server.tool(annotations=READ, meta=WAITS, structured_output=False)
    async def wait_for_research(
        research_id: str,
        timeout_s: Annotated[int, Field(ge=1, le=MAX_RUN_WAIT_S, description="how long to wait at most")] = (
            DEFAULT_RESEARCH_WAIT_S
        ),
    ) -> str:
        """Wait until every arm of the question has ended, or a page fires on one of its runs (to diagnose and act
        within the plan), or timeout_s: then its state. The wait is not charged to you."""
        path = _research_path(research_id)
        deadline = time.monotonic() + timeout_s
        seen: set[str] | None = None
        while True:
            doc = (await lab.json("GET", path))["research"]
            runs = {r for arm in doc.get("arm_states", []) for r in arm["runs"]}
            try:
                listed = (await lab.json("GET", "/pages"))["pages"] if runs else []
            except ToolError:  # no pager on this labbot: the arms' end is all there is to wait for
                listed = []
            pages = [p for p in listed if p.get("run_id") in runs]
            if seen is None:
                seen = {p["id"] for p in pages}
            fresh = [p for p in pages if p["id"] not in seen]
            if fresh:
                said = "\n".join(f"page {p['id']} · {p['kind']} · run {p['run_id']} · {p['summary']}" for p in fresh)
                return f"a page fired on this question's runs:\n{said}\n\n{research_text(doc)}"
            if doc["all_ended"] or doc["status"] not in ("running",):
                return f"every arm has ended:\n{research_text(doc)}" if doc["all_ended"] else research_text(doc)
            left = deadline - time.monotonic()
            if left <= 0:
                return f"still running after {format_duration(timeout_s)}:\n{research_text(doc)}"
            await asyncio.sleep(min(RUN_POLL_S, left))

    @server.tool(annotations=ADD, structured_output=False)
    async def research_act(
        research_id: str,
        action: Annotated[
            Literal["restart", "drop_trial", "stop_arm", "stop"], Field(description="one the plan lists")
        ],
        arm: str | None = None,
        trial: Annotated[int | None, Field(ge=0, description="drop_trial: the trial's number")] = None,
        run_id: Annotated[str | None, Field(description="restart: a run of the plan")] = None,
        as_agent: Launcher = None,
    ) -> str:
        """Act on a failure within the approved plan, with no new approval: only the actions the plan lists, only on
        its own arms and runs (anything else is refused)."""
        body: dict[str, Any] = {"action": action}
        for key, value in (("arm", arm), ("trial", trial), ("run_id", run_id)):
            if value is not None:
                body[key] = value
        params = {"by": "researcher", **_for(lab, as_agent)}
        doc = await lab.json("POST", _research_path(research_id, "act"), json=body, params=params)
        return f"{action} done:\n{research_text(doc['research'])}"

    @server.tool(annotations=ADD, structured_output=False)
    async def submit_report(
        research_id: str,
        verdict: Annotated[str, Field(description="the answer in a sentence, its numbers as [[VALUE | SOURCE]]")],
        text: Annotated[str, Field(description="the write-up (Markdown): the table, the evidence, numbers as claims")],
        follow_ups: Annotated[
            list[dict[str, str]] | None,
            Field(description="follow-ups to file as Linear issues, each {title, description}"),
        ] = None,
        as_agent: Launcher = None,
    ) -> str:
        """Give the answer. labbot recomputes every [[VALUE | SOURCE]] from its store first: a number that does not
        match, or one bound to no source, refuses the report (nothing is posted) with what differs and the text as
        the store has it. Accepted, it ends the question (answered, or incomplete when an arm was cut short), is
        posted in the thread, published where the plan says, and kept as a finding."""
        body = {"verdict": verdict, "text": text, "follow_ups": follow_ups or []}
        path = _research_path(research_id, "report")
        doc = (await lab.json("POST", path, json=body, params=_for(lab, as_agent)))["research"]
        report = doc["report"]
        return (
            f"report accepted ({report['status']}): {report['counts']['ok']} claim(s) checked against the store; "
            f"finding {doc['finding_id']}\n{research_text(doc)}"
        )


def _add_artifact_tools(server: MCPServer, lab: LabApi) -> None:
    """The agent's own artifact store (``/api/v1/artifacts``): putting and sharing only add to it, so no approval."""

    @server.tool(annotations=READ, structured_output=False)
    async def list_artifacts(
        as_agent: StoreOwner = None,
    ) -> str:
        """Your artifacts and those other agents shared with you: id, name, size, content type, sharing."""
        agent = as_agent or lab.agent
        doc = await lab.json("GET", "/artifacts", params={"agent": agent})
        usage = doc["usage"]
        head = (
            f"agent {agent}: {usage['artifacts']} artifact(s), {format_bytes(usage['used_bytes'])} of "
            f"{format_bytes(usage['quota_bytes'])} used"
        )
        return "\n".join([head, *(_artifact_line(a, agent) for a in doc["artifacts"])])

    @server.tool(annotations=ADD, structured_output=False)
    async def put_artifact(
        name: Annotated[str, Field(description="a name in your store, e.g. report.md; the same name replaces it")],
        text: Annotated[str, Field(description="the content (text)")],
        as_agent: StoreOwner = None,
    ) -> str:
        """Store text as an artifact in your own store (a report, notes, a small CSV or JSON file)."""
        headers = {"Content-Type": _text_type(name)}
        params = {"agent": as_agent or lab.agent, "name": name}
        r = await lab.request("POST", "/artifacts", params=params, content=text.encode(), headers=headers)
        a = r.json()["artifact"]
        verb = "stored" if r.status_code == 201 else "replaced"
        return f"{verb} {a['name']} as {a['id']} ({format_bytes(a['size'])}, {a['content_type']})"

    @server.tool(annotations=READ, structured_output=False)
    async def get_artifact(
        artifact_id: Annotated[str, Field(description="an id from list_artifacts")],
        as_agent: StoreOwner = None,
    ) -> str:
        """An artifact's content as text (yours or one shared with you); the first 64 KiB of a longer one."""
        path = _path("artifact", artifact_id)
        data, headers, cut = await lab.read(path, MAX_ARTIFACT_TEXT, params={"agent": as_agent or lab.agent})
        content_type = headers.get("content-type", "application/octet-stream")
        size = headers.get("content-length")
        text = _decode(data, content_type)
        if text is None:
            shown = format_bytes(int(size)) if size and size.isdigit() else "unknown size"
            return f"artifact {artifact_id} is binary ({content_type}, {shown}): not shown as text"
        if cut:
            total = format_bytes(int(size)) if size and size.isdigit() else "more"
            first = format_bytes(MAX_ARTIFACT_TEXT)
            text += f"\n[cut: artifact {artifact_id} has {total}; only its first {first} are shown]"
        return text

    @server.tool(annotations=ADD, structured_output=False)
    async def share_artifact(
        artifact_id: Annotated[str, Field(description="an id of one of your own artifacts")],
        with_agent: Annotated[str, Field(description="the agent that may then read it")],
        as_agent: StoreOwner = None,
    ) -> str:
        """Let another agent read one of your artifacts (it can read it, not change or delete it)."""
        params = {"agent": as_agent or lab.agent, "with": with_agent}
        a = (await lab.json("POST", _path("artifact", artifact_id, "share"), params=params))["artifact"]
        return f"{a['id']} ({a['name']}) is shared with {', '.join(a.get('shared_with') or [with_agent])}"

    @server.tool(annotations=ADD, structured_output=False)
    async def post_artifact(
        artifact_id: Annotated[str, Field(description="an id from list_artifacts")],
        as_agent: StoreOwner = None,
        in_channel: Annotated[str | None, Field(description="set by labbot: the Slack channel you work in")] = None,
        in_thread: Annotated[str | None, Field(description="set by labbot: the Slack thread you work in")] = None,
    ) -> str:
        """Post one of your artifacts (or one shared with you) into the Slack thread you work in, as a file."""
        if not in_channel:
            raise ToolError("there is no Slack thread to post into (this agent is not working in one)")
        params = {"agent": as_agent or lab.agent, "channel": in_channel}
        if in_thread:
            params["thread_ts"] = in_thread
        posted = await lab.json("POST", _path("artifact", artifact_id, "post"), params=params)
        return f"posted {posted['name']} into the thread"


def _add_eval_suite_tools(server: MCPServer, lab: LabApi) -> None:
    """Eval suites: the ones the agent's researcher may run, and generating one (a labbot run: needs approval)."""

    @server.tool(annotations=READ, structured_output=False)
    async def list_eval_suites(
        as_agent: Reader = None,
    ) -> str:
        """The eval suites you may run: id, source repository and commit, number of tasks, flaky tests dropped."""
        suites = (await lab.json("GET", "/evals/suites", params=_viewer(lab, as_agent)))["suites"]
        return (
            "\n".join(
                f"{s['suite']} · {s['source']} @ {s['commit'][:10]} · {s['tasks']} tasks"
                + (f" · {len(s['flaky'])} flaky dropped" if s.get("flaky") else "")
                for s in suites
            )
            or "no eval suites yet: generate_eval_suite makes one from the codebase"
        )

    @server.tool(annotations=READ, structured_output=False)
    async def get_eval_suite(
        suite_id: Annotated[str, Field(description="an id from list_eval_suites")],
        as_agent: Reader = None,
    ) -> str:
        """One suite's tasks (JSON): each task's file, symbol, statement, fail_to_pass and pass_to_pass tests."""
        path = _eval_path("suites", "suite", suite_id)
        suite = (await lab.json("GET", path, params=_viewer(lab, as_agent)))["suite"]
        for task in suite.get("tasks", []):
            task.pop("canary", None)  # the seal's marker: not for a model's eyes
        return json.dumps(suite, indent=1)

    @server.tool(annotations=WRITE, structured_output=False)
    async def generate_eval_suite(
        count: Annotated[int, Field(ge=1, le=100, description="how many delete-and-restore tasks")] = 10,
        seed: Annotated[int, Field(ge=0, le=2**31, description="which functions are chosen")] = 0,
        deletion: Annotated[
            Literal["body", "function", "mixed"],
            Field(description="body: function bodies removed; function: whole functions (harder); mixed"),
        ] = "body",
        deletions: Annotated[
            int, Field(ge=1, le=5, description="features of one file each task deletes (a harder suite: 2 or 3)")
        ] = 1,
        prefer: Annotated[
            Literal["any", "deep"], Field(description="deep: the largest function bodies first (a harder suite)")
        ] = "any",
        as_agent: Launcher = None,
    ) -> str:
        """Generate an eval suite from the codebase labbot serves, as a labbot run of the eval-generate job (needs a
        human's approval): functions its tests execute are deleted (``deletions`` of one file per task), each task
        validated in a sandbox. list_eval_suites shows the suite when the run has succeeded."""
        params = {"count": count, "seed": seed, "deletion": deletion, "deletions": deletions, "prefer": prefer}
        body = {"job": "eval-generate", "params": params, "owner": _launcher(lab, as_agent)}
        run = (await lab.json("POST", "/runs", json=body))["run"]
        return f"generating: {run_line(run)}"


def _add_eval_run_tools(server: MCPServer, lab: LabApi) -> None:
    """Eval runs: running a suite (a labbot run: needs approval), its results, two runs compared."""

    @server.tool(annotations=WRITE, structured_output=False)
    async def run_eval(
        suite_id: Annotated[str, Field(description="an id from list_eval_suites")],
        solver: Annotated[
            str, Field(description="gold (validates the suite), none, agent[:MODEL], or a shell command")
        ] = "gold",
        solver_dir: Annotated[
            str | None,
            Field(
                description="a command solver's agent folder, bound read-only at /solver: a name of [eval] solver_dirs"
            ),
        ] = None,
        allow_hosts: Annotated[
            list[str] | None,
            Field(description="hosts the command solver may reach through labbot's proxy ([eval] solver_hosts)"),
        ] = None,
        as_agent: Launcher = None,
    ) -> str:
        """Run an eval suite as a labbot run of the eval job (needs a human's approval); get_eval_results reads it.
        An installed agent is a command solver with its folder (solver_dir) and the hosts it needs (allow_hosts); its
        own secrets are never an agent's to pass (the researcher's CLI sends them)."""
        body: dict[str, Any] = {
            "suite": _checked("suite", suite_id),
            "solver": solver,
            "owner": _launcher(lab, as_agent),
        }
        if solver_dir:
            body["solver_dir"] = solver_dir
        if allow_hosts:
            body["allow_hosts"] = allow_hosts
        doc = (await lab.json("POST", "/evals/runs", json=body, params=_viewer(lab, as_agent)))["eval"]
        return f"eval run {doc['id']} launched: {doc['suite']} with solver {doc['solver']} ({doc['status']})"

    @server.tool(annotations=READ, structured_output=False)
    async def get_eval_results(
        run_id: Annotated[str, Field(description="the eval run's id")],
        as_agent: Reader = None,
    ) -> str:
        """An eval run's results: status, pass rate with its 95% interval, each sample's result, time and tokens, and
        the isolation probes' verdicts (a run of a suite you may run)."""
        doc = (await lab.json("GET", _eval_path("runs", "run", run_id), params=_viewer(lab, as_agent)))["eval"]
        iso = doc.get("isolation") or {}
        rate, ci = doc.get("pass_rate"), doc.get("interval")
        shown = f" · pass rate {rate:.0%}" if isinstance(rate, int | float) else ""
        if shown and isinstance(ci, list) and len(ci) == 2:
            shown += f" (95% CI {ci[0]:.0%}–{ci[1]:.0%})"
        lines = [f"eval {doc['id']} · {doc.get('suite')} · solver {doc.get('solver')} · {doc.get('status')}{shown}"]
        if iso.get("probes"):
            failed = [p["name"] for p in iso["probes"] if not p["passed"]]
            lines.append("isolation: sealed" if not failed else f"SEAL FAILED ({', '.join(failed)}): untrusted")
        lines += [_sample_line(s) for s in doc.get("samples") or []]
        return "\n".join(lines)

    @server.tool(annotations=READ, structured_output=False)
    async def compare_eval_runs(
        run_a: Annotated[str, Field(description="an eval run's id")],
        run_b: Annotated[str, Field(description="another eval run of the same suite and tasks")],
        as_agent: Reader = None,
    ) -> str:
        """Two eval runs of one suite, paired by task: the difference of pass rates with its 95% interval, and
        whether the suite can tell the two solvers apart (only when the interval excludes zero)."""
        params = {
            "a": api_client.check_id("run", run_a),
            "b": api_client.check_id("run", run_b),
            **_viewer(lab, as_agent),
        }
        doc = (await lab.json("GET", "/evals/compare", params=params))["comparison"]
        paired, unpaired = doc["paired"], doc["unpaired"]
        return "\n".join(
            [
                f"{doc['suite']} · {doc['tasks']} tasks · A {doc['a']['id']} ({doc['a']['solver']}) "
                f"{doc['a_rate']:.0%} vs B {doc['b']['id']} ({doc['b']['solver']}) {doc['b_rate']:.0%}",
                f"A − B = {doc['difference']:+.0%}, paired 95% CI {paired[0]:+.0%} to {paired[1]:+.0%} "
                f"(unpaired {unpaired[0]:+.0%} to {unpaired[1]:+.0%})",
                f"verdict: {doc['verdict']}" + (" — the seal failed on a run: untrusted" if doc["untrusted"] else ""),
            ]
        )


def _eval_path(collection: str, kind: str, the_id: str) -> str:
    """``/evals/suites/ID`` or ``/evals/runs/ID``: the id checked before any request, every segment escaped."""
    try:
        return api_client.api_path("evals", collection, api_client.check_id(kind, the_id))
    except ApiError as e:
        raise tool_error(e) from None
