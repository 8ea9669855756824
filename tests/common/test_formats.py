"""The one duration format (labbot.common.durations.format_duration) and the one byte format
(labbot.common.humanize.format_bytes)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labbot.common.durations import format_duration, parse_duration
from labbot.common.humanize import format_bytes


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (-3, "0s"),
        (0.012, "12ms"),
        (0.3, "300ms"),
        (0.5, "500ms"),
        (0.9996, "999ms"),
        (1, "1s"),
        (1.5, "1.5s"),
        (2.3, "2.3s"),
        (7.0, "7s"),
        (9.99, "9.9s"),
        (45, "45s"),
        (45.9, "45s"),
        (60, "1m"),
        (130, "2m 10s"),
        (600, "10m"),
        (603, "10m 3s"),
        (3600, "1h"),
        (3900, "1h 5m"),
        (3959, "1h 5m"),
        (8000, "2h 13m"),
        (90000, "1d 1h"),
        (math.inf, "forever"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_an_unknown_duration_says_so() -> None:
    assert format_duration(None) == "—" and format_duration(math.nan) == "—"
    assert format_duration(None, unknown="-") == "-"


@given(st.floats(min_value=0.001, max_value=1e9))
def test_a_duration_is_never_shown_longer_than_it_is_and_reads_back(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) <= seconds * (1 + 1e-9)


@given(st.floats(min_value=0.001, max_value=1e9), st.floats(min_value=0.001, max_value=1e9))
def test_longer_durations_never_look_shorter(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert parse_duration(format_duration(lo)) <= parse_duration(format_duration(hi))


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (14, "14 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (65536, "64 KiB"),
        (150_003, "146.5 KiB"),
        (1_887_436, "1.8 MiB"),
        ((1 << 20) - 1, "1 MiB"),  # rounds up into the next unit, never "1024 KiB"
        (100 << 20, "100 MiB"),
        (1 << 30, "1 GiB"),
        (-5, "0 B"),
    ],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text


@given(st.integers(min_value=0, max_value=1 << 50))
def test_a_byte_count_shows_at_most_four_digits_before_its_unit(n: int) -> None:
    number, unit = format_bytes(n).split(" ")
    assert unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB") and float(number) < 1024
