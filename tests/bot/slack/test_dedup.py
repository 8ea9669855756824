"""labbot.bot.slack.dedup: a key is new once within its window."""

from __future__ import annotations

from labbot.bot.slack.dedup import SeenKeys


def test_repeats_inside_the_window_are_dropped_and_forgotten_after() -> None:
    now = [0.0]
    seen = SeenKeys(ttl_s=10, clock=lambda: now[0])
    assert seen.first_time("Ev1") and not seen.first_time("Ev1")
    assert seen.first_time("Ev2")
    now[0] = 11
    assert seen.first_time("Ev1")


def test_bounded() -> None:
    seen = SeenKeys(ttl_s=1000, max_keys=3)
    for i in range(10):
        assert seen.first_time(f"k{i}")
    assert seen.first_time("k0")  # evicted long ago
