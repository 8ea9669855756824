"""The text tables (bot/render/tables.py), pure functions of the API's JSON: the runs table's metric column."""

from __future__ import annotations

from typing import Any

from labbot.bot.render.tables import capacity_text, run_details, runs_table


def _run(run_id: str, job: str, metrics: dict[str, Any], **over: Any) -> dict[str, Any]:
    return {
        "id": run_id,
        "job": job,
        "name": f"{job}-{run_id}",
        "status": "running",
        "attempt": 1,
        "step": 40,
        "metrics": metrics,
        "owner": "alice",
        "created_at": None,
    } | over


def test_a_table_of_loss_runs_keeps_its_loss_column() -> None:
    old = _run("aaaaaa", "tiny-lm", {"loss": 2.5, "tokens_per_s": 900.0})  # a run JSON from before headlines
    new = _run("bbbbbb", "tiny-lm", {"loss": 1.25}, plot=["loss"], headline="loss")
    header, *rows = runs_table([old, new]).splitlines()
    assert header.split()[6] == "LOSS"
    assert rows[0].split()[6] == "2.5000" and rows[1].split()[6] == "1.2500"


def test_once_a_run_headlines_another_metric_the_column_names_each_runs_metric() -> None:
    lm = _run("aaaaaa", "tiny-lm", {"loss": 2.5})
    rl = _run(
        "bbbbbb", "tiny-rl", {"reward": 1.0, "pass_rate": 0.62}, plot=["reward", "pass_rate"], headline="pass_rate"
    )
    waiting = _run("cccccc", "tiny-rl", {}, plot=["reward"], headline="reward")
    header, *rows = runs_table([lm, rl, waiting]).splitlines()
    assert header.split()[6] == "HEADLINE"
    assert "loss 2.5000" in rows[0] and "pass_rate 0.6200" in rows[1] and "reward -" in rows[2]


def test_a_queued_runs_details_name_no_ray_job_until_it_is_admitted() -> None:
    base = {"params": {}, "created_at": "2025-03-01T12:00:00+00:00", "ray_submission_id": "labbot-aaaaaa-1"}
    queued = _run("aaaaaa", "tiny-lm", {}, status="queued", queue_position=1, purpose="training", **base)
    text = run_details(queued)
    assert "- (queued: not on Ray yet)" in text and "labbot-aaaaaa-1" not in text
    assert "1st in line for training" in text
    assert "labbot-aaaaaa-1" in run_details({**queued, "status": "pending", "queue_position": None})


def test_capacity_lists_each_node_of_a_multinode_cluster() -> None:
    doc = {
        "caps_set": False,
        "cluster": {
            "cpus": 2.0,
            "gpus": 0.0,
            "nodes": [
                {"id": "h" * 56, "name": "10.0.0.6", "head": True, "resources": {}},
                {"id": "a" * 56, "name": "10.0.0.7", "head": False, "resources": {"CPU": 1.0, "accelerator": 1.0}},
            ],
        },
        "use": {"runs": 1, "cpus": 1.0, "gpus": 0.0},
        "purposes": [],
    }
    text = capacity_text(doc)
    assert "cluster: 2 CPUs, 0 GPUs" in text
    assert "node 10.0.0.6 (hhhhhhhh, head): nothing" in text
    assert "node 10.0.0.7 (aaaaaaaa): CPU=1, accelerator=1" in text
    one = {**doc, "cluster": {**doc["cluster"], "nodes": doc["cluster"]["nodes"][:1]}}
    assert "node " not in capacity_text(one), "one node: the totals say it all"
