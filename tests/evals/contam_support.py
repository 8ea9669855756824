"""The sandbox's view of the host before issue 24 (``/usr`` whole, the interpreter's prefix whole, the venv whole),
as a :class:`Sandbox` variant, and today's with only the venv as it was: what the contamination tests and
``benchmarks/contamination.py`` compare against."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from labbot.evals.sandbox.bwrap import Sandbox, host_view, interpreter_prefixes, venv_masks


def wide_view() -> list[str]:
    argv = ["--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin"]
    argv += ["--symlink", "usr/lib", "/lib"]
    if Path("/usr/lib64").is_dir():
        argv += ["--symlink", "usr/lib64", "/lib64"]
    for prefix in interpreter_prefixes():
        argv += ["--ro-bind", prefix, prefix]
    return argv


def _replace(argv: list[str], old: Sequence[str], new: Sequence[str]) -> list[str]:
    for i in range(len(argv) - len(old) + 1):
        if argv[i : i + len(old)] == list(old):
            return [*argv[:i], *new, *argv[i + len(old) :]]
    raise AssertionError(f"{list(old)[:6]}... is not in the sandbox's argv: the bind section changed")


class UnmaskedVenvSandbox(Sandbox):
    """A sample sandbox whose venv is shown whole, its vendored trees unmasked (as before issue 24); the host's
    view is today's."""

    def argv(self, cmd: Sequence[str], **kwargs: Any) -> list[str]:
        argv = super().argv(cmd, **kwargs)
        for mask in venv_masks(self.spec.venv) if self.spec.venv is not None else []:
            argv = _replace(argv, ["--tmpfs", str(mask), "--remount-ro", str(mask)], [])
        return argv


class WideSandbox(UnmaskedVenvSandbox):
    """A sample sandbox with the old, wide view of the host."""

    def argv(self, cmd: Sequence[str], **kwargs: Any) -> list[str]:
        return _replace(super().argv(cmd, **kwargs), host_view(self.spec), wide_view())
