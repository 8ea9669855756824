"""`labbot console` driven as a person at the keyboard, for the console's end-to-end stories."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from support import free_port, wait_for

from labbot.training.ray_cluster import RayConnection


def console_env(tmp_path: Path, ray_head: RayConnection, **extra: str) -> dict[str, str]:
    """The environment of a console under test: none of labbot's, Ray's, Slack's or a model's settings of this
    process, its home in ``tmp_path``, a free port, the session's Ray head; ``extra`` on top."""
    prefixes = ("LABBOT_", "RAY_", "SLACK_", "ANTHROPIC_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update(
        LABBOT_HOME=str(tmp_path / "home"),
        LABBOT_PORT=str(free_port()),
        RAY_ADDRESS=ray_head.address,
        RAY_AUTH_TOKEN=ray_head.token or "",
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


class ConsoleSession:
    """`labbot console` as a person at the keyboard: lines typed one at a time, the screen read as it changes."""

    def __init__(self, cwd: Path, env: dict[str, str], *flags: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labbot.bot.cli.main", "console", "--wait", "10", *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            text=True,
        )
        self._out: list[str] = []
        self._err: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        for stream, sink in ((self.proc.stdout, self._out), (self.proc.stderr, self._err)):
            threading.Thread(target=lambda s=stream, k=sink: k.extend(s), daemon=True).start()

    @property
    def screen(self) -> str:
        return "".join(self._out)

    def type(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def shows(self, pattern: str, *, timeout: float = 60, what: str, after: int = 0) -> re.Match[str]:
        """The first match of ``pattern`` on the screen (from character ``after``), once there is one; a timeout
        says what the screen showed last."""
        try:
            return wait_for(lambda: re.search(pattern, self.screen[after:]), timeout=timeout, what=what)
        except AssertionError as e:
            raise AssertionError(f"{e} — the console's last lines:\n{self.screen[-3000:]}") from None

    def streamed(self, after: int = 0) -> str:
        """The streamed answers' text on the screen since character ``after``, their pieces joined again: a piece
        goes on a new ``▸`` line whenever another message came between (a card, a summary), wherever Slack's stream
        was flushed."""
        return "".join(re.findall(r"(?m)^\s*(?:│ )?▸ (.*)$", self.screen[after:]))

    def says(self, pattern: str, *, timeout: float = 60, what: str, after: int = 0) -> re.Match[str]:
        """The first match of ``pattern`` in the streamed answers since ``after``, once there is one."""
        try:
            return wait_for(lambda: re.search(pattern, self.streamed(after)), timeout=timeout, what=what)
        except AssertionError as e:
            raise AssertionError(f"{e} — the console's last lines:\n{self.screen[-3000:]}") from None

    def close(self) -> tuple[int, str]:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        return code, "".join(self._err)
