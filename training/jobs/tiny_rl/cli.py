"""tiny-rl's command line: every ``TinyRLConfig`` field is a flag (``--a_b`` and ``--a-b`` both work)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from labbot.training.jobs.flags import config_from_flags, dataclass_parser
from labbot.training.jobs.runtime import exit_on_sigterm
from labbot.training.jobs.tiny_rl.config import ALGOS, TEACHERS, TinyRLConfig
from labbot.training.jobs.tiny_rl.gate import GateFailed
from labbot.training.jobs.tiny_rl.loop import train


def build_parser() -> argparse.ArgumentParser:
    return dataclass_parser(
        TinyRLConfig,
        prog="python -m labbot.training.jobs.tiny_rl",
        description="RL with textual feedback (GRPO / self-distillation) on multi-digit addition.",
        choices={"algo": ALGOS, "teacher": TEACHERS},
    )


def parse_config(argv: Sequence[str] | None = None) -> TinyRLConfig:
    return config_from_flags(build_parser(), TinyRLConfig, argv)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(argv)
    exit_on_sigterm()
    try:
        s = train(cfg)
    except GateFailed as e:
        print(f"tiny-rl: {e}", file=sys.stderr, flush=True)
        return 1
    final = "-" if s["final_pass_rate"] is None else f"{s['final_pass_rate']:.3f}"
    warm = "-" if s["warmup_pass_rate"] is None else f"{s['warmup_pass_rate']:.3f}"
    print(
        f"done: steps {s['start_step']}..{s['final_step']}, pass rate {warm} -> {final}, "
        f"{s['generations']} generations, {s['stale_dropped']} stale dropped, {s['steps_per_s']:.1f} steps/s",
        flush=True,
    )
    return 0
