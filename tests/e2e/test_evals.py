"""The evals user story, end to end on a real project labbot did not write (inflection 0.5.1 from its sdist):

``labbot eval generate`` makes validated tasks from the checkout (which stays byte-identical), the suite is kept by
the control plane, and each ``labbot eval run`` is a labbot run of the ``eval`` job on the real Ray head: the gold
solver scores 100 %, a command that plants a ``conftest.py`` forcing every test to pass 0 %, each with the isolation
probes green; ``compare`` tells them apart, ``show``/``list`` give the JSON contract, and the run's ``.eval`` log is
in the artifact store and opens with inspect's reader (what ``inspect view`` reads).
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.slack import SlackFake
from real_repos import INFLECTION, committed_repo, fetch_sdist
from slack_driver import OWNER, SlackSide, slack_env
from support import Serve, wait_for

from labbot.training.ray_cluster import RayConnection

# a solver that does not restore anything and makes every test report a pass instead
CHEAT = (
    "printf 'import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef pytest_runtest_makereport(item, call):\\n"
    '    outcome = yield\\n    rep = outcome.get_result()\\n    rep.outcome = "passed"\\n\' > conftest.py'
)


@pytest.fixture(scope="module")
def slack(tmp_path_factory: pytest.TempPathFactory, ray_head: RayConnection) -> Iterator[SlackSide]:
    """A real `labbot serve` with Slack (faked at its HTTP edge): the CLI and Slack both drive it."""
    home = tmp_path_factory.mktemp("evals-home")
    (home / "labbot.toml").write_text('[slack]\ncard_every = "2s"\nprogress_every = "5s"\n')
    fake = SlackFake(users={OWNER: "alice"})
    fake.start()
    env = slack_env(fake, home / "labbot.toml")
    serve = Serve(home / "state", ray_address=ray_head.address, ray_token=ray_head.token, extra_env=env).start()
    try:
        yield SlackSide(fake, serve)
        fake.check_against_spec()
    finally:
        serve.stop()
        fake.stop()


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _json(out: subprocess.CompletedProcess[str]) -> Any:
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _run(lab: Serve, suite: str, solver: str) -> dict[str, Any]:
    return _json(lab.cli("eval", "run", suite, "--solver", solver, "--max-samples", "2", "--json", timeout=900))


def _sealed(doc: dict[str, Any]) -> None:
    iso = doc["isolation"]
    failed = [(p["name"], p["evidence"][:300]) for p in iso["probes"] if not p["passed"]]
    assert iso["score"] == 1.0 and not failed, failed
    names = {p["name"] for p in iso["probes"]}
    assert len(names) >= 30, names  # the sandbox battery and the tampering probes, together


@pytest.mark.timeout(900)  # two sealed eval runs with their isolation batteries, beside the other test workers
def test_generate_then_gold_from_slack_and_a_cheat_on_a_real_project_compared(
    slack: SlackSide, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    lab = slack.serve
    cached = getattr(request.config, "cache", None)
    cache = Path(cached.mkdir("labbot-evals-generate")) if cached is not None else tmp_path
    repo = committed_repo(fetch_sdist(*INFLECTION, cache / "sdists"), tmp_path / "checkout")
    before = _snapshot(repo)

    generated = _json(lab.cli("eval", "generate", str(repo), "--count", "2", "--seed", "3", "--json", timeout=900))
    suite = generated["suite"]
    assert len(generated["tasks"]) == 2
    for task in generated["tasks"]:
        assert set(task) >= {"id", "path", "symbol", "fail_to_pass", "pass_to_pass"}
        assert task["fail_to_pass"] and task["path"] == "inflection/__init__.py"
    assert _snapshot(repo) == before  # the user's checkout: byte-identical, and git sees nothing changed
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True)
    assert status.stdout == ""

    # from Slack: an unknown suite is an ephemeral error naming the one there is; nothing is launched
    assert slack.command("eval run suite-000000000000").status_code == 200
    refused = wait_for(lambda: [t for t in slack.ephemerals() if "no suite" in t], timeout=30, what="the refusal")
    assert suite in refused[0] and _json(lab.cli("runs", "--json")) == []
    # the gold run from Slack: a thread like any run's, and at its end the results table and the .eval log
    gold_id = slack.launched(f"eval run {suite} --solver gold --max-samples 2")
    wait_for(lambda: lab.run(gold_id)["status"] in ("succeeded", "failed"), timeout=600, interval=2, what="its end")
    gold = _json(lab.cli("eval", "show", gold_id, "--json"))
    assert gold["status"] == "succeeded" and gold["pass_rate"] == 1.0, gold
    table = wait_for(
        lambda: next((m.text for m in slack.thread(gold_id) if "pass rate 100% (95% CI" in str(m.blocks)), None),
        timeout=60,
        what="the results table in the run's thread",
    )
    assert table
    wait_for(  # uploaded after the table (files.upload_v2: three calls)
        lambda: f"{gold_id}.eval" in [f["name"] for m in slack.thread(gold_id) for f in m.files],
        timeout=60,
        what="the .eval log in the run's thread",
    )
    assert [s["passed"] for s in gold["samples"]] == [True, True]
    assert {s["task"] for s in gold["samples"]} == {t["id"] for t in generated["tasks"]}
    _sealed(gold)

    # (no change scoring 0 % is tests/evals/running/test_eval_run.py's, in process: the cheat changes something and
    # fails)
    cheat = _run(lab, suite, CHEAT)
    assert cheat["pass_rate"] == 0.0 and not any(s["passed"] for s in cheat["samples"]), cheat
    _sealed(cheat)

    compared = _json(lab.cli("eval", "compare", gold["id"], cheat["id"], "--json"))
    assert compared["tasks"] == 2 and compared["difference"] == 1.0 and compared["verdict"] == "A is better"
    assert compared["paired"][0] > 0
    assert slack.command(f"eval compare {gold['id']} {cheat['id']}").status_code == 200
    wait_for(
        lambda: any(
            "verdict: A is better (the interval excludes zero)" in str(m.blocks)
            for m in slack.fake.ephemeral_messages(slack.ws.channel, OWNER)
        ),
        timeout=30,
        what="the comparison, answered in Slack",
    )

    # each eval run is a labbot run of the eval job
    runs = _json(lab.cli("runs", "--json"))
    assert {r["id"] for r in runs if r["job"] == "eval"} == {gold["id"], cheat["id"]}
    shown = _json(lab.cli("eval", "show", gold["id"], "--json"))
    assert {"id", "suite", "solver", "status", "pass_rate", "interval", "samples", "isolation"} <= set(shown)
    assert shown["suite"] == suite and shown["solver"] == "gold" and shown["pass_rate"] == 1.0
    low, high = shown["interval"]
    assert high == 1.0 and low < 1.0, "the pass rate with its 95 % interval"
    assert all({"task", "passed", "output"} <= set(s) for s in shown["samples"])
    listed = _json(lab.cli("eval", "list", "--json"))
    assert [s["suite"] for s in listed["suites"]] == [suite]
    assert {r["id"] for r in listed["runs"]} == {gold["id"], cheat["id"]}

    # the .eval log is kept in the artifact store, and inspect's reader opens it
    with lab.client() as http:
        stored = http.get("/artifacts", params={"agent": "evals"}).json()["artifacts"]
        assert {a["name"] for a in stored} >= {f"{suite}.tar.gz", f"{gold['id']}.eval"}
        log_id = next(a["id"] for a in stored if a["name"] == f"{gold['id']}.eval")
        data = http.get(f"/artifacts/{log_id}", params={"agent": "evals"}).content
    log_file = tmp_path / f"{gold['id']}.eval"
    log_file.write_bytes(data)
    assert zipfile.is_zipfile(log_file)
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(log_file))
    assert log.status == "success" and log.samples is not None and len(log.samples) == 2
