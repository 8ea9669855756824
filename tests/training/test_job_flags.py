"""The reference jobs' command lines (training/jobs/flags.py): every field of a config dataclass is a flag."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from labbot.training.jobs.flags import config_from_flags, dataclass_parser


@dataclass
class Config:
    steps: int = field(default=3, metadata={"help": "steps in all"})
    learning_rate: float = 0.5
    mode: str = "a"

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be at least 1, got {self.steps}")


def parse(argv: list[str]) -> Config:
    parser = dataclass_parser(Config, prog="job", description="a job", choices={"mode": ("a", "b")})
    return config_from_flags(parser, Config, argv)


def test_flags_are_typed_from_the_defaults_in_both_spellings() -> None:
    assert parse([]) == Config()
    cfg = parse(["--steps", "7", "--learning-rate", "1e-3", "--mode", "b"])
    assert cfg == Config(steps=7, learning_rate=0.001, mode="b") and isinstance(cfg.learning_rate, float)
    assert parse(["--learning_rate", "2"]).learning_rate == 2.0


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--step", "3"], "unrecognized arguments: --step"),  # no abbreviations
        (["--steps", "x"], "invalid int value: 'x'"),
        (["--mode", "c"], "invalid choice: 'c'"),
        (["--steps", "0"], "steps must be at least 1, got 0"),  # the config's own check, as a usage error
    ],
)
def test_bad_flags_exit_2_with_a_usage_message(argv: list[str], msg: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2
    assert msg in capsys.readouterr().err


def test_only_int_float_and_str_fields_become_flags() -> None:
    @dataclass
    class Bad:
        on: bool = False

    with pytest.raises(TypeError, match=r"Bad\.on: only int, float and str fields become flags"):
        dataclass_parser(Bad, prog="job", description="")
