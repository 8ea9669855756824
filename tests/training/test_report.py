"""labbot.training.report: a run's Notion report as Markdown — the facts, the loss curve drawn in text and sampled in a
table,
the config — from the run's JSON and its series (pure functions)."""

from __future__ import annotations

import json
import math

from labbot.training.report import loss_chart, plot_image, report_metrics, run_report

RUN = {
    "id": "k3xq7p",
    "job": "tiny-lm",
    "name": "lr-sweep-3",
    "owner": "U0ALICE001",
    "status": "succeeded",
    "attempt": 2,
    "step": 600,
    "checkpoint_step": 600,
    "ray_submission_id": "labbot-k3xq7p-2",
    "metrics": {"loss": 1.23, "tokens_per_s": 5100.0},
    "params": {"steps": 600, "lr": 0.0003},
    "created_at": "2026-12-01T08:00:00+00:00",
}


def test_the_report_has_the_facts_the_curve_and_the_config() -> None:
    loss = [(s, 4.0 * math.exp(-s / 200) + 1.0) for s in range(0, 601, 5)]
    loss[60] = (300, float("nan"))
    title, md = run_report(RUN, {"loss": loss}, thread_url="https://acme.slack.com/archives/C1/p1")
    assert title == "lr-sweep-3 — tiny-lm run k3xq7p (succeeded)"
    assert "| status | succeeded |" in md and "| attempt | 2 |" in md
    assert "[the run's Slack thread](https://acme.slack.com/archives/C1/p1)" in md
    assert "## Loss curve" in md and "121 points from step 0 to 600" in md and "1 point(s) were not finite" in md
    assert "| tokens_per_s | 5100.0 |" in md
    config = md.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(config) == RUN["params"]
    table = [line for line in md.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(table) == 12 and table[0].startswith("| 0 | 5") and table[-1].startswith("| 600 |")


def test_the_chart_falls_left_to_right_within_its_width() -> None:
    chart = loss_chart([(s, 10.0 - s / 100) for s in range(1000)], width=40, height=8)
    rows = chart.splitlines()
    assert len(rows) == 10 and rows[0].lstrip().startswith("10 ┤•")  # the highest value, at the left
    assert rows[7].rstrip().endswith("•") and "step 0" in rows[-1] and "step 999" in rows[-1]
    assert all(len(r.split("┤", 1)[1]) == 40 for r in rows[:8])
    assert loss_chart([(1, 2.0)]) == "(not enough points to draw)"
    assert "•" in loss_chart([(1, 2.0), (2, 2.0)])  # flat: drawn on one line, no division by zero


def test_a_plot_link_is_embedded_as_the_curves_image() -> None:
    url = "https://labbot.acme.internal/plots/k3xq7p/loss.png?sig=ab12"
    _, md = run_report(RUN, {"loss": [(1, 3.0), (2, 2.0)]}, plot_url=url)
    assert f"![loss curve of run k3xq7p]({url})" in md
    assert "![" not in run_report(RUN, {"loss": [(1, 3.0), (2, 2.0)]})[1]


def test_a_failed_run_shows_its_error_and_no_curve_without_points() -> None:
    _, md = run_report({**RUN, "status": "failed", "error": "CUDA error: out of memory"}, {"loss": []})
    assert "## Error" in md and "out of memory" in md and "curve" not in md


def test_a_job_plotting_other_metrics_gets_their_curves_and_its_plot_image() -> None:
    rl = {**RUN, "job": "rl-demo", "plot": ["reward", "pass_rate"], "headline": "pass_rate"}
    assert report_metrics(rl) == ["reward", "pass_rate", "loss", "val_loss", "eval_loss"]
    assert report_metrics(RUN) == ["loss", "val_loss", "eval_loss"]  # a run JSON from before jobs named plots
    assert (plot_image(rl), plot_image(RUN), plot_image({**RUN, "plot": ["loss"]})) == ("metrics", "loss", "loss")
    url = "https://labbot.acme.internal/plots/k3xq7p/metrics.png?sig=ab12"
    series = {"reward": [(1, 0.1), (2, 0.4)], "pass_rate": [(1, 0.2), (2, 0.5)], "loss": [(1, 3.0), (2, 2.0)]}
    _, md = run_report(rl, series, plot_url=url)
    assert f"## Plots\n\n![reward, pass_rate of run k3xq7p]({url})" in md
    assert "## Reward curve" in md and "## Pass_rate curve" in md and "## Loss curve" in md
    assert md.count("![") == 1  # the plot image once, not again under loss
