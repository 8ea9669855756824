"""``labbot``: the command line. Its subcommands are a contract (README "Command line", docs/architecture.md).

``serve`` and ``db upgrade`` run in this process; every other command is a client of the running control plane's
``/api/v1``. ``--json`` prints one JSON document on stdout. Exit codes: 0 done, 1 it failed, 2 bad input.

Each subcommand's parser names its handler (``set_defaults(func=...)``): ``handler(api, args)`` for a client of the
API, which ``main`` opens and closes around it, or ``handler(args)`` with ``offline=True`` for what runs here alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from labbot.bot.cli import checkpoints as cli_checkpoints
from labbot.bot.cli import claims as cli_claims
from labbot.bot.cli import compare as cli_compare
from labbot.bot.cli import evals as cli_evals
from labbot.bot.cli import experiments as cli_experiments
from labbot.bot.cli import feedback as cli_feedback
from labbot.bot.cli import findings as cli_findings
from labbot.bot.cli import research as cli_research
from labbot.bot.cli.output import CLIError, print_json
from labbot.bot.render import tables
from labbot.common.api_client import (
    BAD_ADMIN_TOKEN,
    BAD_ID,
    NO_ADMIN_TOKEN,
    NOT_ANSWERING,
    ApiClient,
    ApiError,
    check_id,
    home,
    me,
    page_path,
    run_path,
)
from labbot.common.durations import format_duration
from labbot.common.errors import LabbotError
from labbot.training.params import parse_assignments

WAITING = ("queued", "pending", "restarting")
# what to do, after the API client's own message, when labbot cannot be asked
ADVICE = {
    NO_ADMIN_TOKEN: ": start the control plane first (`labbot serve` or `make run`), with the same LABBOT_HOME",
    NOT_ANSWERING: ": start it with `labbot serve` (or `make run`), or set LABBOT_PORT / LABBOT_PUBLIC_URL",
}


def _exit_code(e: ApiError) -> int:
    """2 when the input was bad (an id not of its format, or a 4xx other than a conflict with the run's state), else
    1."""
    if e.code in (BAD_ID, BAD_ADMIN_TOKEN):
        return 2
    return 2 if e.status is not None and 400 <= e.status < 500 and e.code != "conflict" else 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise CLIError(f"{self.prog}: {message} (see `{self.prog} --help`)", exit_code=2)


def _version() -> str:
    """The installed package's version (the source tree's, when run from a checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("labbot")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="labbot", description="labbot: launch, watch and discuss training runs.")
    p.add_argument("--version", action="version", version=f"labbot {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    _process_commands(sub)
    _launch_command(sub)
    _run_commands(sub)
    _page_commands(sub)
    _cluster_commands(sub)
    cli_evals.add_parser(sub)
    cli_feedback.add_parser(sub)
    cli_compare.add_parser(sub)
    cli_experiments.add_parser(sub)
    cli_claims.add_parser(sub)
    cli_findings.add_parser(sub)
    cli_checkpoints.add_parser(sub)
    cli_research.add_parser(sub)
    _maintenance_commands(sub)
    return p


def _process_commands(sub: argparse._SubParsersAction[_Parser]) -> None:
    """labbot itself: the control plane, and the console around it."""
    s = sub.add_parser("serve", help="run the control plane (HTTP API, Ray, reconciler; Slack when configured)")
    s.set_defaults(func=_serve, offline=True)
    s = sub.add_parser("console", help="labbot with a local Slack in this terminal (what `make run` starts)")
    s.set_defaults(func=_console, offline=True)
    s.add_argument(
        "--fast", action="store_true", help="demo cadence: card every 5s, progress every 15s, escalation after 1m"
    )
    s.add_argument(
        "--wait",
        type=float,
        default=1800.0,
        metavar="S",
        help="at the end of piped input, wait this long for the session's runs to finish",
    )
    s.add_argument(
        "--demo",
        action="store_true",
        help="agents on a scripted demo model (no key needed; its answers say so): what `make demo` starts",
    )


def _launch_command(sub: argparse._SubParsersAction[_Parser]) -> None:
    """launch, with everything a run can be given."""
    s = sub.add_parser("launch", help="launch a job on Ray: labbot launch tiny-lm steps=100")
    s.set_defaults(func=_launch)
    s.add_argument("job", help="a job name from `labbot jobs`")
    s.add_argument("params", nargs="*", metavar="KEY=VALUE", help="job parameters, e.g. steps=100 lr=3e-4")
    s.add_argument("--name", help="a name for the run (default: JOB-ID)")
    s.add_argument("--gpus", type=float, help="GPUs for the job's entrypoint (default: the job's)")
    s.add_argument("--stall-after", metavar="DUR", help="no progress for this long is a stall, e.g. 30s, 10m")
    s.add_argument("--pending-after", metavar="DUR", help="PENDING in Ray this long is a page, e.g. 5m")
    s.add_argument("--max-restarts", type=int, metavar="N", help="automatic restarts before paging a human")
    s.add_argument(
        "--alert",
        action="append",
        default=[],
        metavar="WORDS",
        help="a metric alert, e.g. 'pass_rate below 0.2 for 10m' or 'reward flat for 15m warning' (repeatable; "
        "replaces the job's alert of the same name)",
    )
    s.add_argument(
        "--watch",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an RL watchdog threshold for this run, e.g. kl_max=5 or entropy_floor=0.1 (repeatable)",
    )
    s.add_argument(
        "--remedy",
        action="append",
        default=[],
        metavar="WORDS",
        help="instead of paging on a finding, roll back to the last good checkpoint and restart with changed "
        "parameters, e.g. 'entropy_collapse: temperature += 1.0; max 2' (repeatable; before the job's own)",
    )
    s.add_argument("--cpus", type=float, help="CPUs for the job's entrypoint (default: the job's)")
    s.add_argument(
        "--resources",
        action="append",
        default=[],
        metavar="K=V",
        help="a custom node resource the job needs, e.g. accelerator=1: it runs only on a node that has it "
        "(repeatable, or ',' between two; over the job's [jobs.NAME] resources)",
    )
    s.add_argument(
        "--purpose",
        metavar="P",
        help="what the run is for: training, eval, data, research or serving (default: the job's); "
        "its [compute] cap applies",
    )
    s.add_argument(
        "--no-queue",
        action="store_true",
        help="over its purpose's cap: refuse with the numbers instead of waiting in the queue",
    )
    s.add_argument("--idempotency-key", help="the same key twice launches once (default: a fresh key)")
    s.add_argument("--no-wait", action="store_true", help="return once submitted, without waiting for RUNNING")
    s.add_argument("--wait-timeout", type=float, default=180.0, metavar="S", help="how long to wait for RUNNING")
    s.add_argument("--json", action="store_true", help="print the run as JSON")


def _run_commands(sub: argparse._SubParsersAction[_Parser]) -> None:
    """runs: the list, one, stop, restart, its logs."""
    s = sub.add_parser("runs", help="list runs, newest first")
    s.set_defaults(func=_runs)
    s.add_argument("--status", help="only runs in this status")
    s.add_argument("--limit", type=int, default=50)
    s.add_argument("--json", action="store_true")

    for name, text in (("run", "show one run"), ("stop", "stop a run"), ("restart", "restart from checkpoint")):
        s = sub.add_parser(name, help=text)
        s.set_defaults(func=_show_run if name == "run" else _act_on_run)
        s.add_argument("id", help="a run id from `labbot runs`")
        s.add_argument("--json", action="store_true")

    s = sub.add_parser("logs", help="a run's logs from Ray")
    s.set_defaults(func=_logs)
    s.add_argument("id")
    s.add_argument("--tail", type=int, metavar="N", help="only the last N lines")
    s.add_argument("--attempt", type=int, metavar="K", help="attempt K's logs (default: the current attempt's)")
    s.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until the attempt ends")


def _page_commands(sub: argparse._SubParsersAction[_Parser]) -> None:
    """pages: the list, acknowledge, resolve."""
    s = sub.add_parser("pages", help="open pages (stalls, failures, divergence, the cluster down)")
    s.set_defaults(func=_pages)
    s.add_argument("--all", action="store_true", help="resolved pages too")
    s.add_argument("--run", metavar="ID", help="only this run's pages")
    s.add_argument("--json", action="store_true")
    for name, text in (("ack", "acknowledge a page: its escalation stops"), ("resolve", "resolve a page by hand")):
        s = sub.add_parser(name, help=text)
        s.set_defaults(func=_act_on_page)
        s.add_argument("page", help="a page id from `labbot pages`")
        s.add_argument("--json", action="store_true")
        if name == "resolve":
            s.add_argument(
                "--cause",
                metavar="TEXT",
                help="what was wrong, in a sentence (recorded; `labbot eval from-incident` scores diagnoses on it)",
            )


def _cluster_commands(sub: argparse._SubParsersAction[_Parser]) -> None:
    """the cluster: compute by purpose, the queue's order, the jobs, the agents' audit trail."""
    s = sub.add_parser("capacity", help="each purpose's use of the cluster against its cap, who uses it, the queue")
    s.set_defaults(func=_capacity)
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("priority", help="move a queued run in its purpose's line (admins): higher goes first")
    s.set_defaults(func=_priority)
    s.add_argument("id", help="a run id from `labbot runs`")
    s.add_argument("priority", type=int, help="a whole number from -1000 to 1000; 0 is a launch's")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("jobs", help="the jobs that can be launched")
    s.set_defaults(func=_jobs)
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("audit", help="the agents' tool calls, newest first (arguments redacted)")
    s.set_defaults(func=_audit)
    s.add_argument("--limit", type=int, default=100, metavar="N", help="at most N calls (default: 100)")
    s.add_argument("--agent", metavar="A", help="only agent A's calls")
    s.add_argument("--json", action="store_true", help="print the calls as one JSON list")


def _maintenance_commands(sub: argparse._SubParsersAction[_Parser]) -> None:
    """the database's migrations, and one built-in MCP server alone."""
    s = sub.add_parser("db", help="database maintenance")
    s.set_defaults(func=_db, offline=True)
    s.add_argument("action", choices=["upgrade"], help="upgrade: apply migrations")

    s = sub.add_parser("mcp", help="run a built-in MCP server over stdio (or --http): labbot mcp codebase")
    s.set_defaults(func=_mcp, offline=True)
    s.add_argument("name", help="a built-in server: codebase, lab, notion, linear or datadog")
    s.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT (bearer token) instead")
    s.add_argument("--host", default="127.0.0.1", help="the address --http listens on (default: 127.0.0.1)")
    s.add_argument(
        "--read-only",
        action="store_true",
        help="serve only tools that change nothing (also: read_only = true in [mcp.servers.NAME] of labbot.toml)",
    )


def _launch(api: ApiClient, a: argparse.Namespace) -> int:
    body: dict[str, Any] = {
        "job": a.job,
        "params": parse_assignments(a.params),
        "owner": me(),
        "idempotency_key": a.idempotency_key or f"cli-{uuid.uuid4()}",
    }
    for key in ("name", "gpus", "cpus", "purpose", "stall_after", "pending_after", "max_restarts"):
        if getattr(a, key) is not None:
            body[key] = getattr(a, key)
    if a.no_queue:
        body["no_queue"] = True
    if a.resources:
        body["resources"] = parse_assignments([p for r in a.resources for p in r.split(",") if p.strip()])
    if a.alert:
        body["alerts"] = list(a.alert)
    if a.watch:
        body["watch"] = parse_assignments(a.watch)
    if a.remedy:
        body["remedies"] = list(a.remedy)
    try:
        doc = api.json("POST", "/runs", json=body)
    except ApiError as e:
        if "Ray" in e.message:
            raise CLIError(f"launch failed: {e.message}", exit_code=_exit_code(e)) from None
        raise
    run = doc["run"]
    say = (lambda *_: None) if a.json else lambda text: print(text, file=sys.stderr, flush=True)
    verb = "launched" if doc["created"] else "already launched (same idempotency key)"
    if doc.get("queued"):
        say(f"{verb} run {run['id']} ({run['job']}), queued: {doc['queued']}")
    else:
        say(f"{verb} run {run['id']} ({run['job']}) as Ray job {run['ray_submission_id']}")
    if not a.no_wait:
        run = _wait_running(api, run, a.wait_timeout, say)
    if a.json:
        print_json(run)
    elif run["status"] == "failed":
        raise CLIError(f"run {run['id']} failed: {run.get('error') or 'see `labbot logs ' + run['id'] + '`'}")
    else:
        say(f"follow it: labbot run {run['id']}   labbot logs {run['id']}   labbot stop {run['id']}")
    return 0


def _wait_running(api: ApiClient, run: dict[str, Any], timeout: float, say: Any) -> dict[str, Any]:
    """Long-poll the control plane until Ray starts (or ends) the run, saying what it is waiting for."""
    start = time.monotonic()
    while run["status"] in WAITING:
        elapsed = time.monotonic() - start
        if elapsed >= timeout:
            after = format_duration(elapsed)
            say(f"  still {run['status']} after {after}; labbot keeps watching it (labbot run {run['id']})")
            return run
        where = tables.queue_words(run)
        if where:
            say(f"  queued: {where} ({format_duration(elapsed)}); it starts when capacity frees")
        else:
            say(f"  waiting for Ray to start it: {run['status']} ({format_duration(elapsed)})")
        wait = max(1, min(20, int(timeout - elapsed)))
        run = api.json("GET", run_path(run["id"]), params={"wait": wait}, timeout=wait + 30)["run"]
    say(f"  {run['status']} after {format_duration(time.monotonic() - start)}")
    return run


def _run_command(a: argparse.Namespace) -> int:
    """The subcommand's handler (its parser's ``func``): alone, or with a client of the control plane's API."""
    if getattr(a, "offline", False):
        return int(a.func(a))
    api = ApiClient()
    try:
        return int(a.func(api, a))
    finally:
        api.close()


def _serve(a: argparse.Namespace) -> int:
    from labbot.bot.config import Settings
    from labbot.bot.serve import serve

    return serve(Settings.from_env())


def _console(a: argparse.Namespace) -> int:
    from labbot.bot.config import Settings
    from labbot.bot.console.repl import run_console

    own_codebase = bool(os.environ.get("LABBOT_CODEBASE_ROOT"))  # else the demo brings a small project of its own
    demo_project = a.demo and not own_codebase
    return run_console(Settings.from_env(), wait_s=a.wait, fast=a.fast, demo=a.demo, demo_project=demo_project)


def _db(a: argparse.Namespace) -> int:
    from labbot.bot.config import Settings
    from labbot.storage.db import Database

    settings = Settings.from_env()
    settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    Database(settings.database_url).upgrade()
    print("database is at the latest migration", file=sys.stderr)
    return 0


def _runs(api: ApiClient, a: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": a.limit}
    if a.status:
        params["status"] = a.status
    runs = api.json("GET", "/runs", params=params)["runs"]
    print_json(runs) if a.json else print(tables.runs_table(runs))
    return 0


def _show_run(api: ApiClient, a: argparse.Namespace) -> int:
    run = api.json("GET", run_path(a.id))["run"]
    print_json(run) if a.json else print(tables.run_details(run))
    return 0


def _act_on_run(api: ApiClient, a: argparse.Namespace) -> int:
    """``labbot stop`` and ``labbot restart``."""
    run = api.json("POST", run_path(a.id, a.command), params={"by": _who()})["run"]
    if a.json:
        print_json(run)
    elif a.command == "stop":
        print(f"run {run['id']} stopped")
    else:
        print(f"run {run['id']} restarting as attempt {run['attempt']} from its latest checkpoint")
    return 0


def _logs(api: ApiClient, a: argparse.Namespace) -> int:
    if a.follow:
        return _follow(api, a.id, a.attempt, a.tail)
    params: dict[str, Any] = {"tail": a.tail} if a.tail is not None else {}
    if a.attempt is not None:
        params["attempt"] = a.attempt
    sys.stdout.write(api.request("GET", run_path(a.id, "logs"), params=params).text.rstrip("\n") + "\n")
    return 0


FOLLOW_EVERY_S = 1.0


def _follow(api: ApiClient, run_id: str, attempt: int | None, tail: int | None) -> int:
    """``logs --follow``: what is there (its last ``tail`` lines), then each new line as it comes, until the attempt
    followed — the run's current one, or the one asked — has ended and its last lines are printed. Ctrl-C stops."""
    following, seen = attempt, None
    while True:
        run = api.request("GET", run_path(run_id)).json()["run"]
        following = following or int(run["attempt"])
        ended = run["status"] in ("succeeded", "failed", "stopped") or int(run["attempt"]) > following
        text = api.request("GET", run_path(run_id, "logs"), params={"attempt": following}).text
        if seen is None:
            new = text if tail is None else "".join(text.splitlines(keepends=True)[-tail:] if tail else [])
        else:  # the new lines; a log Ray cut or rotated meanwhile is printed whole rather than lose lines
            new = text[len(seen) :] if text.startswith(seen) else text
        if new:
            sys.stdout.write(new)
            sys.stdout.flush()
        seen = text
        if ended:
            if int(run["attempt"]) > following:
                print(
                    f"attempt {following} ended; attempt {run['attempt']} runs: labbot logs {run_id} -f",
                    file=sys.stderr,
                )
            return 0
        time.sleep(FOLLOW_EVERY_S)


def _pages(api: ApiClient, a: argparse.Namespace) -> int:
    query: dict[str, Any] = {"all": "1"} if a.all else {}
    if a.run:
        query["run"] = check_id("run", a.run)
    pages = api.json("GET", "/pages", params=query)["pages"]
    print_json(pages) if a.json else print(tables.pages_table(pages))
    return 0


def _act_on_page(api: ApiClient, a: argparse.Namespace) -> int:
    """``labbot ack`` and ``labbot resolve``."""
    cause = getattr(a, "cause", None)
    page = api.json(
        "POST",
        page_path(a.page, a.command),
        params={"by": _who()},
        json={"cause": cause} if cause is not None else None,
    )["page"]
    if a.json:
        print_json(page)
    else:
        by = page.get("acknowledged_by") if a.command == "ack" else page.get("resolved_by")
        print(
            f"page {page['id']} ({page['kind']} on {page.get('run_id') or 'the cluster'}) is {page['state']}"
            f"{f' by {by}' if by else ''}"
        )
    return 0


def _capacity(api: ApiClient, a: argparse.Namespace) -> int:
    doc = api.json("GET", "/capacity")
    print_json(doc) if a.json else print(tables.capacity_text(doc))
    return 0


def _priority(api: ApiClient, a: argparse.Namespace) -> int:
    run = api.json("POST", run_path(a.id, "priority"), params={"by": _who()}, json={"priority": a.priority})["run"]
    print_json(run) if a.json else print(f"run {run['id']}: {tables.priority_words(run)}")
    return 0


def _jobs(api: ApiClient, a: argparse.Namespace) -> int:
    jobs = api.json("GET", "/jobs")["jobs"]
    if a.json:
        print_json(jobs)
    else:
        rows = [[j["name"], j["description"], " ".join(f"{k}={v}" for k, v in j["params"].items())] for j in jobs]
        print(tables.table(["job", "description", "parameters (defaults)"], rows))
    return 0


def _audit(api: ApiClient, a: argparse.Namespace) -> int:
    query = {"limit": a.limit, **({"agent": a.agent} if a.agent else {})}
    calls = api.json("GET", "/audit", params=query)["audit"]
    print_json(calls) if a.json else print(tables.audit_table(calls, agent=a.agent))
    return 0


def _mcp(a: argparse.Namespace) -> int:
    from labbot.bot.config import Settings
    from labbot.mcp_servers import BUILTINS
    from labbot.mcp_servers.runner import drop_destructive_tools, http_token, run

    if a.name not in BUILTINS:
        raise CLIError(f"unknown MCP server {a.name!r}; known servers: {', '.join(sorted(BUILTINS))}", exit_code=2)
    table = ((Settings.from_env().config.get("mcp") or {}).get("servers") or {}).get(a.name) or {}
    try:
        server = BUILTINS[a.name]()
        if a.read_only or table.get("read_only") is True:
            removed = drop_destructive_tools(server)
            print(f"read-only: {len(removed)} tool(s) that change things are not served", file=sys.stderr)
        token, path = http_token(home()) if a.http is not None else (None, None)
    except ValueError as e:
        raise CLIError(str(e), exit_code=2) from None
    if a.http is not None:
        where = f"in {path}" if path else "from LABBOT_MCP_TOKEN"
        print(f"MCP server {a.name} on http://{a.host}:{a.http}/mcp; bearer token {where}", file=sys.stderr, flush=True)
    run(server, http_port=a.http, host=a.host, token=token)
    return 0


def _who() -> str:
    return f"cli:{me()}"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return _run_command(args)
    except BrokenPipeError:  # `labbot run ID | head`: the reader has gone; what it wanted it has
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second traceback when Python flushes stdout at exit
        return 0
    except CLIError as e:
        print(f"labbot: {e.message}", file=sys.stderr)
        return e.exit_code
    except ApiError as e:
        print(f"labbot: {e.message}{ADVICE.get(e.code, '')}", file=sys.stderr)
        return _exit_code(e)
    except LabbotError as e:
        print(f"labbot: {e.message}", file=sys.stderr)
        return 2 if 400 <= e.status < 500 else 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
