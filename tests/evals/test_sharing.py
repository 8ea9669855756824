"""Suites belong to who generated them until shared: another researcher's unshared suite is refused like an unknown
one (naming what they can run) and nothing is launched; an owner or an admin shares it with the lab."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from eval_services import make_eval_service, make_suite, slack_lab

from labbot.bot.commands import LAB, Parsed, parse
from labbot.bot.slack.actions import Asker
from labbot.common.errors import LabbotError
from labbot.evals.service import EvalService, pack
from labbot.training.specs import LaunchRequest

ALICE, BOB, ADMIN = "U0ALICE001", "U0BOB00001", "U0ADMIN001"


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
    actions, slack = slack_lab(evals, admins=frozenset({ADMIN}))

    def run(user: str, text: str) -> str:
        parsed = parse(text, LAB)
        assert isinstance(parsed, Parsed), parsed
        asyncio.run(actions.run(parsed, Asker(user, "C0LAB00001", f"t-{len(slack.calls)}")))
        return slack.said("chat.postEphemeral")[-1]

    assert "is not shared with you" in run(BOB, f"eval run {suite}") and evals.runs.runs() == []
    assert "is not shared with you" in run(BOB, f"eval share {suite}")
    assert "shared with the whole lab" in run(ALICE, f"eval share {suite}")
    run(BOB, f"eval run {suite}")
    assert [r["owner"] for r in evals.runs.runs()] == [BOB]
