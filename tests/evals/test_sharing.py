"""Suites belong to who generated them until shared: another researcher's unshared suite is refused like an unknown
one (naming what they can run) and nothing is launched; an owner or an admin shares it with the lab."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from eval_services import finished, make_eval_service, make_suite, paged_run, slack_lab
from mcp import Client
from starlette.applications import Starlette
from starlette.testclient import TestClient

from labbot.bot.api import create_app
from labbot.bot.commands import LAB, Parsed, parse
from labbot.bot.slack.handlers import Asker, dispatch
from labbot.common.errors import LabbotError
from labbot.evals.service import EvalService, pack
from labbot.mcp_servers.lab import LabApi, build_server
from labbot.training.specs import LaunchRequest
from labbot.training.telemetry_store import TelemetryStore

ALICE, BOB, ADMIN = "U0ALICE001", "U0BOB00001", "U0ADMIN001"
TOKEN = "admin-token-for-sharing-tests"


@pytest.fixture
def evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EvalService:
    return make_eval_service(tmp_path, monkeypatch)


def alices_suite(evals: EvalService, tmp_path: Path) -> str:
    made = make_suite(tmp_path / "alice", tasks=2)
    kept = evals.add_suite(io.BytesIO(pack(tmp_path / "alice")), owner=ALICE)
    assert kept["owners"] == [ALICE] and kept["shared"] is False
    return made.id


def test_an_unshared_suite_is_its_owners_and_refused_to_others_naming_what_they_can_run(
    evals: EvalService, tmp_path: Path
) -> None:
    suite = alices_suite(evals, tmp_path)
    lab_wide = make_suite(tmp_path / "old", tasks=3)
    evals.add_suite(io.BytesIO(pack(tmp_path / "old")))  # no owner: the lab's (as suites were before owners)
    assert {s["suite"] for s in evals.suites(BOB)} == {lab_wide.id}
    assert {s["suite"] for s in evals.suites(ALICE)} == {suite, lab_wide.id}
    assert {s["suite"] for s in evals.suites(BOB, admin=True)} == {suite, lab_wide.id}
    with pytest.raises(LabbotError, match=f"suite {suite} is not shared with you: {ALICE} can share it") as e:
        evals.launch(suite, solver="gold", owner=BOB, viewer=BOB)
    assert e.value.status == 404 and f"you can run {lab_wide.id}" in e.value.message
    assert evals.runs.runs() == []
    assert evals.launch(suite, solver="gold", owner=ALICE, viewer=ALICE)["owner"] == ALICE
    assert evals.launch(suite, solver="gold", owner=ADMIN, viewer=ADMIN, admin=True)["owner"] == ADMIN


def test_only_an_owner_or_an_admin_shares_and_then_everyone_runs_it(evals: EvalService, tmp_path: Path) -> None:
    suite = alices_suite(evals, tmp_path)
    with pytest.raises(LabbotError, match="is not shared with you"):
        evals.share(suite, by=BOB)
    assert evals.share(suite, by=ALICE) == {"suite": suite, "owners": [ALICE], "shared": True}
    assert suite in {s["suite"] for s in evals.suites(BOB)}
    assert evals.launch(suite, solver="none", owner=BOB, viewer=BOB)["owner"] == BOB
    evals.add_suite(io.BytesIO(pack(tmp_path / "alice")), owner=BOB)  # the same suite from Bob: an owner too
    assert evals.suites(BOB)[0]["owners"] == [ALICE, BOB] and evals.suites(BOB)[0]["shared"] is True


@pytest.mark.parametrize(("owner", "private"), [(ALICE, True), ("agent", False), ("root", False)])
def test_a_suite_an_eval_generate_run_wrote_is_that_researchers(
    evals: EvalService, tmp_path: Path, owner: str, private: bool
) -> None:
    """A researcher's generation (from Slack) is theirs; an agent's or the CLI user's is the lab's."""
    gen = evals.runs.launch(LaunchRequest(job="eval-generate", owner=owner)).run
    made = make_suite(evals.suites_root / "staging", tasks=2)
    (evals.suites_root / "staging").rename(evals.suites_root / made.id)
    (evals.suites_root / ".owners").mkdir()
    (evals.suites_root / ".owners" / f"{made.id}.run").write_text(gen["id"])  # what the job writes
    if private:
        assert evals.suites(BOB) == [] and [s["owners"] for s in evals.suites(ALICE)] == [[ALICE]]
        with pytest.raises(LabbotError, match="there is no suite you can run yet"):
            evals.launch("suite-0123456789ab", solver="gold", owner=BOB, viewer=BOB)
    else:
        assert [s["shared"] for s in evals.suites(BOB)] == [True]


def test_slack_refuses_bob_alices_suite_until_she_shares_it(evals: EvalService, tmp_path: Path) -> None:
    suite = alices_suite(evals, tmp_path)
    deps, slack = slack_lab(evals, admins=frozenset({ADMIN}))

    def run(user: str, text: str) -> str:
        parsed = parse(text, LAB)
        assert isinstance(parsed, Parsed), parsed
        asyncio.run(dispatch(deps, parsed, Asker(user, "C0LAB00001", f"t-{len(slack.calls)}")))
        return slack.said("chat.postEphemeral")[-1]

    assert "is not shared with you" in run(BOB, f"eval run {suite}") and evals.runs.runs() == []
    assert "is not shared with you" in run(BOB, f"eval share {suite}")
    assert "shared with the whole lab" in run(ALICE, f"eval share {suite}")
    run(BOB, f"eval run {suite}")
    assert [r["owner"] for r in evals.runs.runs()] == [BOB]


# -- an eval run's results follow its suite: whoever may run the suite sees its runs -----------------------------

UNKNOWN = "zz9zz9"  # a run id of the right shape that no run has


class TwoResearchers:
    """Alice's unshared suite with a finished run of hers; a lab-wide suite with a finished run of Bob's."""

    def __init__(self, evals: EvalService, tmp_path: Path) -> None:
        self.evals = evals
        self.suite = alices_suite(evals, tmp_path)
        lab_wide = make_suite(tmp_path / "lab", tasks=3)  # another suite (two tasks would be Alice's again)
        evals.add_suite(io.BytesIO(pack(tmp_path / "lab")))  # no owner: the lab's, everyone's
        self.lab_suite = lab_wide.id
        verdicts = {"t00-add": True, "t01-add": False}
        self.alices = finished(evals, self.suite, "agent:x/secret-solver", verdicts, owner=ALICE)
        self.bobs = finished(evals, self.lab_suite, "none", {**verdicts, "t02-add": True}, owner=BOB)

    def bobs_second_on_alices_suite(self) -> str:
        """After she shared it: Bob's own run of Alice's suite, comparable with hers."""
        return finished(self.evals, self.suite, "none", {"t00-add": False, "t01-add": False}, owner=BOB)


@pytest.fixture
def lab_of_two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str) -> TwoResearchers:
    return TwoResearchers(make_eval_service(tmp_path, monkeypatch, database_url), tmp_path)


def refusal(call: Callable[[], object]) -> LabbotError:
    with pytest.raises(LabbotError) as e:
        call()
    return e.value


@pytest.mark.databases
def test_another_researchers_unshared_run_is_refused_like_an_unknown_id_until_she_shares(
    lab_of_two: TwoResearchers,
) -> None:
    evals, alices, bobs = lab_of_two.evals, lab_of_two.alices, lab_of_two.bobs
    unknown = refusal(lambda: evals.results(UNKNOWN, viewer=BOB))
    hidden = refusal(lambda: evals.results(alices, viewer=BOB))
    assert (hidden.status, hidden.code) == (unknown.status, unknown.code) == (404, "unknown_run")
    assert hidden.message == unknown.message.replace(UNKNOWN, alices)
    assert (
        hidden.message
        == f"no eval run '{alices}' that you can see; eval runs you can see: {bobs} (`eval list` lists them)"
    )
    assert [r["id"] for r in evals.eval_runs(viewer=BOB)] == [bobs]
    for a, b in ((alices, bobs), (bobs, alices)):  # either side refused before any statistics
        refused = refusal(lambda a=a, b=b: evals.compare(a, b, viewer=BOB))
        assert refused.message == hidden.message and refused.status == 404

    assert evals.results(alices, viewer=ALICE)["samples"][0]["task"] == "t00-add"
    assert {r["id"] for r in evals.eval_runs(viewer=ALICE)} == {alices, bobs}  # the lab's suite is hers to run too
    assert {r["id"] for r in evals.eval_runs(viewer=ADMIN, admin=True)} == {alices, bobs}
    assert evals.results(alices, viewer=ADMIN, admin=True)["solver"] == "agent:x/secret-solver"
    assert {r["id"] for r in evals.eval_runs()} == {alices, bobs}  # no viewer: the admin-token holder

    evals.share(lab_of_two.suite, by=ALICE)
    assert evals.results(alices, viewer=BOB)["solver"] == "agent:x/secret-solver"
    assert {r["id"] for r in evals.eval_runs(viewer=BOB)} == {alices, bobs}
    theirs = lab_of_two.bobs_second_on_alices_suite()
    assert evals.compare(alices, theirs, viewer=BOB)["difference"] == 0.5


@pytest.mark.databases
def test_incident_suites_are_the_labs_so_their_runs_are_everyones(lab_of_two: TwoResearchers) -> None:
    """Cases from pages and 👎 feedback form one lab-wide suite (no owners, shared): a run of it is everyone's, as
    running it is."""
    evals = lab_of_two.evals
    paged_run(evals)  # Alice's run, paged; she resolved it with its cause
    made = evals.from_incident("pq3x7k", by=ALICE)
    case, suite = made["case"]["id"], made["suite"]["suite"]
    alices = finished(evals, suite, "agent:anthropic/model-x", {case: True}, owner=ALICE)
    assert evals.results(alices, viewer=BOB)["samples"] == [
        {"task": case, "passed": True, "output": "", "time_s": 3.5, "tokens": 1200}
    ]
    assert alices in {r["id"] for r in evals.eval_runs(viewer=BOB)}


def _app(evals: EvalService) -> Starlette:
    """labbot's API over the two researchers' lab, Carol its admin."""
    return create_app(
        evals.runs,
        TelemetryStore(evals.runs.db),
        admin_token=TOKEN,
        evals=evals,
        admins=frozenset({ADMIN}),
    )


@pytest.mark.databases
def test_the_api_shows_a_run_only_to_whom_by_names_and_never_answers_500(lab_of_two: TwoResearchers) -> None:
    evals, alices, bobs, suite = lab_of_two.evals, lab_of_two.alices, lab_of_two.bobs, lab_of_two.suite
    app = _app(evals)
    with TestClient(app, headers={"authorization": f"Bearer {TOKEN}"}) as http:

        def get(path: str, **params: str) -> tuple[int, dict[str, Any]]:
            r = http.get(f"/api/v1{path}", params=params)
            return r.status_code, r.json()

        unknown = get(f"/evals/runs/{UNKNOWN}", by=BOB)
        status, hidden = get(f"/evals/runs/{alices}", by=BOB)
        assert (status, unknown[0]) == (404, 404)
        assert hidden["error"]["code"] == unknown[1]["error"]["code"] == "unknown_run"
        assert hidden["error"]["message"] == unknown[1]["error"]["message"].replace(UNKNOWN, alices)
        assert f"eval runs you can see: {bobs}" in hidden["error"]["message"]
        assert [r["id"] for r in get("/evals/runs", by=BOB)[1]["evals"]] == [bobs]
        assert get("/evals/compare", a=alices, b=bobs, by=BOB) == (404, hidden)
        assert get("/compare", a=bobs, b=alices, by=BOB) == (404, hidden)
        status, doc = get(f"/evals/suites/{suite}", by=BOB)  # its saturation names its runs and their pass rates
        assert status == 404 and "is not shared with you" in doc["error"]["message"]
        assert [s["suite"] for s in get("/evals/suites", by=BOB)[1]["suites"]] == [lab_of_two.lab_suite]
        for bad in ("", " ", "U" * 101):
            status, doc = get(f"/evals/runs/{alices}", by=bad)
            assert status == 400 and "query parameter by names whom the request is for" in doc["error"]["message"]

        for who in ({"by": ALICE}, {"by": ADMIN}, {}):  # her own; an admin; the admin-token holder (the CLI)
            assert get(f"/evals/runs/{alices}", **who)[1]["eval"]["solver"] == "agent:x/secret-solver"
            assert {r["id"] for r in get("/evals/runs", **who)[1]["evals"]} == {alices, bobs}

        assert http.post(f"/api/v1/evals/suites/{suite}/share", params={"by": ALICE}).status_code == 200
        theirs = lab_of_two.bobs_second_on_alices_suite()
        assert get(f"/evals/runs/{alices}", by=BOB)[1]["eval"]["samples"][0]["task"] == "t00-add"
        assert {r["id"] for r in get("/evals/runs", by=BOB)[1]["evals"]} == {alices, bobs, theirs}
        assert get("/evals/compare", a=alices, b=theirs, by=BOB)[1]["comparison"]["difference"] == 0.5
        assert get("/compare", a=alices, b=theirs, by=BOB)[1]["comparison"]["kind"] == "eval"
        assert get(f"/evals/suites/{suite}", by=BOB)[1]["suite"]["saturation"]["suite"] == suite


@pytest.mark.databases
def test_slack_shows_lists_and_compares_alices_run_for_bob_only_once_she_shares(lab_of_two: TwoResearchers) -> None:
    evals, alices, bobs = lab_of_two.evals, lab_of_two.alices, lab_of_two.bobs
    deps, slack = slack_lab(evals, admins=frozenset({ADMIN}))

    def run(user: str, text: str) -> str:
        parsed = parse(text, LAB)
        assert isinstance(parsed, Parsed), parsed
        before = len(slack.calls)
        asyncio.run(dispatch(deps, parsed, Asker(user, "C0LAB00001", f"t-{before}")))
        [(method, _params)] = slack.calls[before:]  # one answer, to the asker alone unless said in the channel
        return f"{method} {slack.said(method)[-1]}"

    unknown = run(BOB, f"eval show {UNKNOWN}")
    hidden = run(BOB, f"eval show {alices}")
    assert hidden == unknown.replace(UNKNOWN, alices) and hidden.startswith("chat.postEphemeral")
    assert f"no eval run '{alices}' that you can see; eval runs you can see: {bobs}" in hidden
    assert "secret-solver" not in hidden
    listed = run(BOB, "eval list")
    assert bobs in listed and alices not in listed
    said = hidden.partition(" *Usage*")[0]  # the refusal; its usage line is the command's
    assert run(BOB, f"eval compare {alices} {bobs}").startswith(said)
    assert run(BOB, f"compare {bobs} {alices}").startswith(said)  # to Bob alone: nothing said in the channel

    assert "agent:x/secret-solver" in run(ALICE, f"eval show {alices}")
    assert "agent:x/secret-solver" in run(ADMIN, f"eval show {alices}")
    assert alices in run(ADMIN, "eval list")

    run(ALICE, f"eval share {lab_of_two.suite}")
    theirs = lab_of_two.bobs_second_on_alices_suite()
    assert "agent:x/secret-solver" in run(BOB, f"eval show {alices}")
    assert alices in run(BOB, "eval list")
    assert "A − B = +50%" in run(BOB, f"eval compare {alices} {theirs}")
    assert run(BOB, f"compare {alices} {theirs}").startswith("chat.postMessage")


@pytest.mark.databases
def test_an_agent_reads_eval_runs_for_its_researcher(lab_of_two: TwoResearchers) -> None:
    """The lab tools pass the agent's researcher (``as_agent`` RESEARCHER/ROLE, which labbot fills in) as ``?by=``."""
    evals, alices, bobs = lab_of_two.evals, lab_of_two.alices, lab_of_two.bobs
    app = _app(evals)
    lab = LabApi("http://labbot.test", TOKEN, agent="eval-writer", transport=httpx.ASGITransport(app))

    def call(agent: str, tool: str, **args: str) -> tuple[bool, str]:
        async def go() -> tuple[bool, str]:
            async with Client(build_server(lab)) as client:
                r = await client.call_tool(tool, {**args, "as_agent": agent})
                return r.is_error, "".join(getattr(c, "text", "") for c in r.content)

        return asyncio.run(go())

    bobs_agent, alices_agent = f"{BOB}/eval-writer", f"{ALICE}/eval-writer"
    unknown = call(bobs_agent, "get_eval_results", run_id=UNKNOWN)
    hidden = call(bobs_agent, "get_eval_results", run_id=alices)
    assert hidden[0] and hidden == (True, unknown[1].replace(UNKNOWN, alices))
    assert f"no eval run '{alices}' that you can see; eval runs you can see: {bobs}" in hidden[1]
    compared = call(bobs_agent, "compare_eval_runs", run_a=bobs, run_b=alices)
    assert compared == (True, hidden[1].replace("get_eval_results", "compare_eval_runs"))
    refused = call(bobs_agent, "get_eval_suite", suite_id=lab_of_two.suite)
    assert refused[0] and "is not shared with you" in refused[1]
    launched = call(bobs_agent, "run_eval", suite_id=lab_of_two.suite, solver="gold")  # nor run on Bob's behalf
    assert launched[0] and "is not shared with you" in launched[1], launched
    # an installed agent's folder goes by name through the same checks as at every front door
    folder = call(alices_agent, "run_eval", suite_id=lab_of_two.suite, solver="cmd:/solver/run.sh", solver_dir="x")
    assert folder[0] and "--solver-dir 'x' is not one of [eval] solver_dirs" in folder[1], folder
    assert lab_of_two.suite not in call(bobs_agent, "list_eval_suites")[1]
    shown = f"eval {alices} · {lab_of_two.suite} · solver agent:x/secret-solver · succeeded"
    assert call(alices_agent, "get_eval_results", run_id=alices)[1].startswith(shown)
    assert call("eval-writer", "get_eval_results", run_id=alices)[1].startswith(shown)  # an outside client: the token's
    evals.share(lab_of_two.suite, by=ALICE)
    theirs = lab_of_two.bobs_second_on_alices_suite()
    assert call(bobs_agent, "get_eval_results", run_id=alices)[1].startswith(shown)
    compared = call(bobs_agent, "compare_eval_runs", run_a=alices, run_b=theirs)
    assert not compared[0] and "A − B = +50%" in compared[1]
