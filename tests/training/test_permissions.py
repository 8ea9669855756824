"""labbot.training.permissions: one rule for the commands, the buttons and the agents' approval gate — what acts on a
run is for that run's owner (or an admin), whoever asked and wherever."""

from __future__ import annotations

import pytest

from labbot.training.permissions import approvers, may, who_may

ALICE, BOB, ADMIN = "U0ALICE001", "U0BOB00001", "U0ADMIN001"
OWNERS = {"r1": ALICE, "r2": BOB}


@pytest.mark.parametrize("action", ["stop", "restart", "lab__stop_run", "lab__restart_run", "file_incident"])
def test_acting_on_a_run_is_for_its_owner_or_an_admin_whoever_asks(action: str) -> None:
    # the /lab command and the button (verb) and the agent's tool call (tool name) get the same answer
    allowed = approvers(action, {"run_id": "r2"}, asker=ALICE, run_owner=OWNERS.get, thread_run="r1")
    assert allowed == (BOB,)
    assert not may(ALICE, allowed, {ADMIN}) and may(BOB, allowed, {ADMIN}) and may(ADMIN, allowed, {ADMIN})
    assert approvers(action, {"run_id": "nosuch"}, asker=ALICE, run_owner=OWNERS.get) == ()  # admins only
    assert approvers(action, {}, asker=ALICE, run_owner=OWNERS.get) == ()


def test_what_is_the_askers_own_is_theirs_and_the_thread_runs_owners() -> None:
    assert approvers("lab__launch_run", {"job": "tiny-lm"}, asker=ALICE, run_owner=OWNERS.get) == (ALICE,)
    assert approvers("notion__create_page", {}, asker=ALICE, run_owner=OWNERS.get, thread_run="r2") == (BOB, ALICE)
    on_behalf = approvers("launch_run", {"job": "tiny-lm", "owner": BOB}, asker=ALICE, run_owner=OWNERS.get)
    assert on_behalf == (BOB,)


def test_who_may_in_words() -> None:
    assert who_may((BOB,)) == f"<@{BOB}> or an admin"
    assert who_may(()) == "an admin"
