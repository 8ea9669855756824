"""A run's thread plots what its job names: a job declaring ``plot = ["reward", "pass_rate"]`` in labbot.toml gets
one image with a panel per metric at its milestone and at the end (a metric not reported yet shows "no data yet"),
and its card shows the headline metric. The real thread keeper, registry, SQLite and telemetry store, against the
Slack emulator (every Web API call checked against Slack's spec when the test ends); Ray is never called.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.slack import SlackFake, started
from thread_lab import Lab, pass_rate, reward

from labbot.bot.render.plots import metrics_plot_png
from labbot.storage.models import Run


@pytest.fixture
def slack() -> Iterator[SlackFake]:
    with started() as fake:
        yield fake


@pytest.fixture
def lab(tmp_path: Path, slack: SlackFake) -> Lab:
    return Lab(tmp_path, slack)


def test_a_job_declaring_reward_and_pass_rate_gets_them_plotted_in_its_thread(lab: Lab) -> None:
    card_ts = lab.launch("rl0001", "rl-demo")
    lab.report("rl0001", range(1, 61), lambda s: {"reward": reward(s)})  # pass_rate not reported yet
    lab.tick()  # 60 % done: the 50 % milestone's plot

    [(info, png)] = lab.files(card_ts)
    assert (
        info["name"] == "rl0001-reward+pass_rate-50.png"
        and info["title"] == "rl-demo-rl0001 reward, pass_rate (50% done)"
    )
    series = {"reward": [(s, reward(s)) for s in range(1, 61)], "pass_rate": []}
    assert png == metrics_plot_png(series, title="rl-demo-rl0001 — reward, pass_rate (50% done)", attempts=[(1, 1)])

    lab.report("rl0001", range(61, 101), lambda s: {"reward": reward(s), "pass_rate": pass_rate(s)})
    lab.end("rl0001")
    lab.tick()  # the end: the final plot, the card and the summary

    (_, first), (final_info, final) = lab.files(card_ts)
    series = {
        "reward": [(s, reward(s)) for s in range(1, 101)],
        "pass_rate": [(s, pass_rate(s)) for s in range(61, 101)],
    }
    assert final == metrics_plot_png(series, title="rl-demo-rl0001 — reward, pass_rate (final)", attempts=[(1, 1)])
    assert final_info["name"] == "rl0001-reward+pass_rate-final.png" and final != first

    card = lab.slack.message(lab.slack.default_channel, card_ts)
    assert card is not None and card.text.endswith("pass_rate 0.6250")  # the headline's latest value: 100 / 160
    assert any("pass_rate 0.3812 → 0.6250" in text for text in lab.slack.texts(thread_ts=card_ts))  # the summary
    assert not any("loss" in text for text in lab.slack.texts(thread_ts=card_ts))


def test_a_run_stored_before_jobs_named_their_plots_still_gets_its_loss_plot(lab: Lab) -> None:
    card_ts = lab.launch("lm0001", "tiny-lm")
    with lab.db.session() as s:  # what a run launched by an older labbot keeps: no plot, no headline
        run = s.get_one(Run, "lm0001")
        run.config = {k: v for k, v in run.config.items() if k not in ("plot", "headline")} | {"params": {"steps": 100}}
    lab.report("lm0001", range(1, 61), lambda s: {"loss": 3.0 / s, "reward": 1.0})
    lab.tick()
    [(info, png)] = lab.files(card_ts)
    assert info["name"] == "lm0001-loss-50.png"
    assert png == metrics_plot_png(
        {"loss": [(s, 3.0 / s) for s in range(1, 61)]}, title="tiny-lm-lm0001 — loss (50% done)", attempts=[(1, 1)]
    )
    card = lab.slack.message(lab.slack.default_channel, card_ts)
    assert card is not None and card.text.endswith("loss 0.0500")
