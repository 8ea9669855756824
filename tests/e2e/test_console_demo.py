"""User story (issue 31): a newcomer without a model key sees what the agents do — `labbot console --demo`, as the
README's quickstart shows it (`make demo`)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from agent_story import TOML
from console_session import ConsoleSession, console_env
from support import wait_for

from labbot.agents.fleet.demo_model import DEMO_LABEL
from labbot.training.launcher import RayLauncher
from labbot.training.ray_cluster import RayConnection

PENDING = r"needs @\w+ or an admin · request (a[0-9a-f]{8})"  # an approval prompt not answered yet


@pytest.mark.timeout(600)  # a sleeper, an eval suite generated and a sealed eval run, beside the other test workers
def test_console_demo_walks_a_newcomer_through_the_agents_on_a_scripted_model(
    tmp_path: Path, ray_head: RayConnection
) -> None:
    """Issue 31's demo, as the README's quickstart shows it: `labbot console --demo` with no model key. A question
    answered with a tool call and streamed with its status; a stop that waits for Approve; an eval suite generated
    from the codebase and run with gold, each launch approved — the model a script, labelled on every answer, and
    everything else real (the lab's MCP tools, the approval gate, the runs on Ray)."""
    (tmp_path / "labbot.toml").write_text(TOML)
    env = console_env(tmp_path, ray_head)
    label = re.escape(DEMO_LABEL.replace("_", "")[:40])
    console = ConsoleSession(tmp_path, env, "--demo")
    run_id = ""
    try:
        console.shows(r"Agents: on the scripted demo model", what="the banner saying the agents are on a script")
        console.shows(r"Things to try with the demo model", what="what to try")
        project = tmp_path / "home" / "demo-project"
        console.shows(re.escape(f"evals come from: {project}"), what="the demo's own project as the codebase")
        console.type("/lab launch sleeper")
        run_id = console.shows(r"run (\w{6}) · Ray job", what="the run card").group(1)
        console.shows(r"running", what="the run running")

        mark = len(console.screen)
        console.type("ask what runs are there?")
        console.says(rf"{run_id} · sleeper · running", what="the answer quoting lab__list_runs", after=mark)
        console.says(label, what="the demo label on the answer", after=mark)
        assert re.search(r"lab__list_runs", console.screen[mark:]), "the tool call is shown as it runs"
        assert re.search(r"│ · labbot is", console.screen[mark:]), "the assistant status line while it works"

        mark = len(console.screen)
        console.type(f"reply {run_id} please stop it")
        request = console.shows(PENDING, what="the approval prompt", after=mark).group(1)
        console.shows(r"\[Approve\] \[Deny\]", what="the Approve / Deny buttons", after=mark)
        with httpx.Client(base_url=f"http://127.0.0.1:{env['LABBOT_PORT']}/api/v1") as api:
            api.headers["Authorization"] = "Bearer " + (tmp_path / "home" / "admin_token").read_text().strip()
            assert api.get(f"/runs/{run_id}").json()["run"]["status"] == "running", "nothing stops unapproved"
            console.type(f"click approve {request}")
            console.says(rf"Done after your approval: stopped: {run_id}", what="the stop's answer", after=mark)
            assert api.get(f"/runs/{run_id}").json()["run"]["status"] == "stopped"

            mark = len(console.screen)
            console.type("ask make an eval from this repo and run it")
            approved: list[str] = []
            for what in ("the generation", "the gold run"):
                asked = wait_for(  # a prompt still waiting (an answered one is redrawn with its verdict)
                    lambda: [r for r in re.findall(PENDING, console.screen[mark:]) if r not in approved],
                    timeout=180,
                    what=f"{what}'s approval prompt",
                )
                approved.append(asked[0])
                console.type(f"click approve {asked[0]}")
            console.says(r"solver gold · succeeded · pass rate 100%", what="the results", timeout=240, after=mark)
            console.says(label, what="the demo label on the results", after=mark)
            [suite] = api.get("/evals/suites").json()["suites"]
            assert suite["tasks"] == 3 and suite["source"] == "demo-project", suite
    finally:
        code, err = console.close()
        if run_id:
            RayLauncher(ray_head).stop(f"labbot-{run_id}-1")
    assert code == 0, err[-3000:]
    assert "Traceback" not in err
