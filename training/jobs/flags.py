"""The reference jobs' command lines: every field of the job's config dataclass is a flag.

A field becomes ``--name`` (and ``--na-me`` for ``na_me``), typed from its default (int, float or str), with its
``help`` metadata as the help text. Bad input exits with status 2 and a usage message, argparse's way, including what
the config's own validation (``__post_init__``) refuses.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def dataclass_parser(
    config: type[Any], *, prog: str, description: str, choices: Mapping[str, Sequence[str]] | None = None
) -> argparse.ArgumentParser:
    """One flag per field of the dataclass ``config``, typed from its default; ``--a_b`` and ``--a-b`` both work."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,  # --step must not quietly mean --steps
    )
    for f in fields(config):
        default = f.default
        if type(default) not in (int, float, str):
            raise TypeError(f"{config.__name__}.{f.name}: only int, float and str fields become flags")
        flags = [f"--{f.name}"]
        if "_" in f.name:
            flags.append(f"--{f.name.replace('_', '-')}")
        parser.add_argument(
            *flags,
            dest=f.name,
            type=type(default),
            default=default,
            choices=(choices or {}).get(f.name),
            help=f.metadata.get("help", ""),
        )
    return parser


def config_from_flags(parser: argparse.ArgumentParser, config: type[T], argv: Sequence[str] | None) -> T:
    """Flags to a config; what the config refuses (a ``ValueError``) is a usage error, exit status 2."""
    args = parser.parse_args(argv)
    try:
        return config(**vars(args))
    except ValueError as e:
        parser.error(str(e))
