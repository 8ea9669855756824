"""The solvers an eval run can use, as inspect solvers over the labbot sandbox, and the ``--solver`` parser.

- ``gold``: the original file restored (``original/TASK.path`` copied into the workspace). Validates a suite: it must
  score 100 %.
- ``none``: nothing changed. Must score 0 %.
- ``agent[:MODEL]``: inspect's ReAct agent (``basic_agent``) with ``bash`` and a file-editing tool, both running in
  the sample's sandbox, on ``MODEL`` (``provider/name``, e.g. ``anthropic/claude-...``) or the configured default.
- ``CMD`` (anything with a space or a shell character, or ``cmd:CMD``): ``sh -c CMD`` run inside the sandbox in
  ``/workspace`` (the task repository), the statement in the file ``$LABBOT_TASK_FILE`` names (``/labbot-task/...``,
  read-only, outside the repository), so an external coding agent can be evaluated as it is. An installed agent
  (a venv, a binary) comes in a folder of ``[eval] solver_dirs``, bound read-only at ``/solver``
  (``--solver-dir NAME``), with the hosts it may reach (``--allow-host``) and secrets of its own (``--solver-env``):
  :mod:`labbot.evals.running.solver_access`. Without hosts the sandbox has no network (the task's venv is at ``/venv``).
  The command is at most :data:`MAX_COMMAND` characters: a longer invocation belongs in a script in the solver dir.

Every solver runs under the sample's time limit (:func:`bounded`); a command solver's processes and memory count in
the sample's cgroup, and a command that reached one of the sample's limits (processes, memory, ``/tmp``...) fails the
sample with that limit named. A solver that ran past it did not finish: its
sample fails without being scored, and every process it started was killed with its sandbox command. The solver's
output tail (what the command printed, the agent's transcript) is kept in the sample's store for the results.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import anyio
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool
from inspect_ai.solver import Generate, Solver, TaskState, basic_agent, solver, system_message
from inspect_ai.tool import Tool, ToolError, bash, tool
from inspect_ai.util import LimitExceededError, sandbox, time_limit

from labbot.common.errors import BadRequest
from labbot.evals.running.solver_access import SOLVER_DIR, redact_values
from labbot.evals.sandbox.bwrap import WORKDIR, Sandbox
from labbot.evals.sandbox.inspect_provider import LabbotSandbox
from labbot.evals.suite import original_dir

SolverKind = Literal["gold", "none", "agent", "cmd"]
DONE_KEY = "labbot:solver_done"  # True once the solver ended on its own (not killed at the limit)
OUTPUT_KEY = "labbot:solver_output"  # the tail of what the solver printed
REASON_KEY = "labbot:solver_unfinished"  # why it did not finish
OUTPUT_TAIL = 4000
CMD_GRACE_S = 10.0
TASK_DIR = "/labbot-task"  # where the cmd solver finds the statement (read-only, outside /workspace)
TASK_FILE = f"{TASK_DIR}/statement.md"
SECRETS_FILE = f"{TASK_DIR}/solver.env"  # the run's --solver-env, sourced before the command
MAX_COMMAND = 2000  # characters of a command solver
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*(:\S*)?")
MODEL = re.compile(r"[A-Za-z0-9_.-]+/\S+")
AGENT_SYSTEM = """\
You are a software engineer working in a Python repository checked out at {workdir} (your working directory).
A feature of the repository was removed; the task statement says which. Restore it so the repository's tests pass.
Use the bash tool to look around and run commands (the project's Python environment is active: `python`, `pytest`),
and the edit_file tool to view, create and edit files. There is no network. When you are done, call {submit}()
with a one-line summary of your change."""


@dataclass(frozen=True)
class SolverSpec:
    kind: SolverKind
    model: str | None = None  # agent: the model, provider/name (None: the configured default)
    command: str | None = None  # cmd: the shell command

    @property
    def label(self) -> str:
        if self.kind == "agent":
            return f"agent:{self.model}" if self.model else "agent"
        if self.kind == "cmd":
            return f"cmd:{self.command}"
        return self.kind


def parse_solver(text: str, *, default_model: str | None = None) -> SolverSpec:
    """``gold``, ``none``, ``agent``, ``agent:MODEL``, ``cmd:CMD`` or a shell command (``CMD`` with a space or a
    shell character); BadRequest names the accepted forms for anything else."""
    text = text.strip()
    accepted = (
        "accepted: gold, none, agent, agent:PROVIDER/MODEL, a shell command such as './run-agent.sh' or "
        "'my-agent --fix' (or any command as cmd:COMMAND)"
    )
    if not text:
        raise BadRequest(f"--solver is empty; {accepted}")
    if len(text) > MAX_COMMAND:
        raise BadRequest(
            f"--solver is {len(text)} characters, over the {MAX_COMMAND} a command may have: put a long agent "
            f"invocation in a script in the agent's folder and run that (--solver-dir NAME --solver "
            f"'{SOLVER_DIR}/run.sh')"
        )
    if text.startswith("cmd:"):
        command = text[4:].strip()
        if not command:
            raise BadRequest(f"--solver cmd: needs a command after the colon; {accepted}")
        return SolverSpec("cmd", command=command)
    if not NAME.fullmatch(text):
        return SolverSpec("cmd", command=text)
    name, _, arg = text.partition(":")
    if name in ("gold", "none") and not arg and ":" not in text:
        return SolverSpec(name)  # type: ignore[arg-type]
    if name == "agent":
        model = arg or default_model
        if ":" in text and not arg:
            raise BadRequest(f"--solver agent: needs a model after the colon (provider/name); {accepted}")
        if model is not None and not MODEL.fullmatch(model):
            raise BadRequest(f"--solver {text}: {model!r} is not a model name (provider/name, e.g. anthropic/...)")
        return SolverSpec("agent", model=model)
    raise BadRequest(f"unknown solver {text!r}; {accepted}")


def _tail(text: str) -> str:
    return text if len(text) <= OUTPUT_TAIL else "…" + text[-OUTPUT_TAIL:]


def _box() -> LabbotSandbox:
    return sandbox().as_type(LabbotSandbox)


@solver
def bounded(inner: Solver, timeout_s: float, grace_s: float = 0.0) -> Solver:
    """``inner`` under a wall-clock limit; records whether it finished, and its output. ``grace_s``: extra time
    for a solver that enforces ``timeout_s`` itself (the cmd solver's sandbox kills its command at the limit and
    keeps what it printed; this limit is the backstop)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.store.set(DONE_KEY, False)
        try:
            with time_limit(timeout_s + grace_s):
                state = await inner(state, generate)
        except LimitExceededError as exc:
            if exc.type == "time":
                state.store.set(REASON_KEY, f"the solver ran past its {timeout_s:g} s limit and was stopped")
                state.store.set(OUTPUT_KEY, _tail(str(state.store.get(OUTPUT_KEY, "")) or _transcript(state)))
                return state
            # another limit (messages, tokens) ended the agent: it finished, what it left is scored
        if state.store.get(OUTPUT_KEY) is None:
            state.store.set(OUTPUT_KEY, _transcript(state))
        if not state.store.get(REASON_KEY):
            state.store.set(DONE_KEY, True)
        return state

    return solve


@solver
def gold_solver(suite_dir: str) -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        path = str(state.metadata["path"])
        data = (original_dir(Path(suite_dir)) / path).read_bytes()
        await _box().write_file(path, data)
        state.store.set(OUTPUT_KEY, f"restored {path} from the original")
        return state

    return solve


@solver
def none_solver() -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.store.set(OUTPUT_KEY, "")
        return state

    return solve


_SECRETS: dict[
    str, Mapping[str, str]
] = {}  # a run's --solver-env by key: never a solver's argument (inspect logs those)


def register_secrets(key: str, env: Mapping[str, str]) -> None:
    """Make ``env`` the environment of the command solvers built with ``secrets=key`` (until :func:`drop_secrets`)."""
    _SECRETS[key] = dict(env)


def drop_secrets(key: str) -> None:
    _SECRETS.pop(key, None)


def _secrets_file(env: Mapping[str, str]) -> str:
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())


@solver
def cmd_solver(command: str, timeout_s: float, solver_dir: str | None = None, secrets: str | None = None) -> Solver:
    """``sh -c command`` in the sample's sandbox; ``solver_dir`` bound read-only at ``/solver``; ``secrets`` the key
    of the variables :func:`register_secrets` holds for it (sourced from a file, never on bwrap's command line)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        box = _box()
        env = _SECRETS.get(secrets, {}) if secrets else {}
        if secrets and not env:
            raise RuntimeError("the run's solver variables are not registered: the run cannot give them")
        binds = {SOLVER_DIR: Path(solver_dir)} if solver_dir else {}
        argv = ["sh", "-c", command]
        with tempfile.TemporaryDirectory(prefix="task-", dir=box.root) as folder:
            Path(folder, Path(TASK_FILE).name).write_text(state.input_text)
            if env:
                fd = os.open(Path(folder, Path(SECRETS_FILE).name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(_secrets_file(env))
                argv = ["sh", "-c", f'. {SECRETS_FILE} && exec sh -c "$1"', "sh", command]
            spec = replace(
                box.sandbox.spec,
                ro_binds={**box.sandbox.spec.ro_binds, TASK_DIR: Path(folder), **binds},
                env={**box.sandbox.spec.env, "LABBOT_TASK_FILE": TASK_FILE, "LABBOT_TASK_ID": box.task_id},
            )
            with Sandbox(spec, within=box.sandbox) as run:  # the sample's group: its processes and memory
                # Sandbox.exec in a thread, not aexec: aexec drops what was printed when it kills at the timeout,
                # and the tail of a hung command's output is what tells why it hung. An interrupted eval is not
                # left waiting: sample_cleanup kills every process working in the workspace, which ends it.
                result = await anyio.to_thread.run_sync(lambda: run.exec(argv, cwd=WORKDIR, timeout_s=timeout_s))
        printed = redact_values(result.stdout + (f"\n{result.stderr}" if result.stderr else ""), list(env.values()))
        status = "killed at the limit" if result.timed_out else f"exit {result.returncode}"
        state.store.set(OUTPUT_KEY, _tail(f"{printed.rstrip()}\n[{status}]".lstrip()))
        if result.timed_out:
            state.store.set(
                REASON_KEY, f"the command ran past its {timeout_s:g} s limit and was killed with all it started"
            )
        elif result.limit is not None:
            state.store.set(REASON_KEY, f"the solver hit {result.limit_note}")
        return state

    return solve


@tool
def edit_file() -> Tool:
    async def execute(
        command: str, path: str, file_text: str | None = None, old_str: str | None = None, new_str: str | None = None
    ) -> str:
        """View, create or edit a text file of the repository.

        Args:
          command: "view" (print the file with line numbers), "create" (write file_text as the whole file) or
            "str_replace" (replace old_str, which must occur exactly once, with new_str).
          path: The file, relative to the repository root (/workspace) or absolute under it.
          file_text: For create: the file's whole content.
          old_str: For str_replace: the exact text to replace.
          new_str: For str_replace: the text to put in its place (empty to delete it).

        Returns:
          The file (view) or a confirmation.
        """
        box = sandbox()
        try:
            if command == "view":
                text = await box.read_file(path)
                return "\n".join(f"{i:6}\t{line}" for i, line in enumerate(text.splitlines(), 1))
            if command == "create":
                if file_text is None:
                    raise ToolError("create needs file_text")
                await box.write_file(path, file_text)
                return f"wrote {path}"
            if command == "str_replace":
                if not old_str:
                    raise ToolError("str_replace needs old_str")
                text = await box.read_file(path)
                count = text.count(old_str)
                if count != 1:
                    raise ToolError(f"old_str occurs {count} times in {path}; it must occur exactly once")
                await box.write_file(path, text.replace(old_str, new_str or "", 1))
                return f"edited {path}"
        except (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, UnicodeDecodeError) as e:
            raise ToolError(f"{path}: {e}") from None
        except OSError as e:  # a symlink on the way (ELOOP), and the like
            raise ToolError(f"{path}: {e.strerror or e}") from None
        raise ToolError(f"unknown command {command!r}: use view, create or str_replace")

    return execute


def _transcript(state: TaskState) -> str:
    """The agent's side of the conversation, as text: what it said, the commands it ran and what they printed."""
    lines: list[str] = []
    for message in state.messages:
        if isinstance(message, ChatMessageAssistant):
            if message.text:
                lines.append(message.text)
            for call in message.tool_calls or []:
                args = call.arguments.get("command") if isinstance(call.arguments, dict) else None
                lines.append(f"$ {call.function} {args if isinstance(args, str) else call.arguments}")
        elif isinstance(message, ChatMessageTool):
            lines.append(message.error.message if message.error else message.text)
    return _tail("\n".join(lines))


def agent_solver(*, bash_timeout_s: int = 180, message_limit: int = 100) -> Solver:
    return basic_agent(
        init=system_message(AGENT_SYSTEM.format(workdir=WORKDIR, submit="submit")),
        tools=[bash(timeout=bash_timeout_s), edit_file()],
        message_limit=message_limit,
    )


def build_solver(
    spec: SolverSpec, *, suite_dir: Path, timeout_s: float, solver_dir: Path | None = None, secrets: str | None = None
) -> Solver:
    """The inspect solver for ``spec``, bounded by the per-sample ``timeout_s``; ``solver_dir`` and ``secrets`` (the
    key of :func:`register_secrets`) only for a command solver."""
    if spec.kind != "cmd" and (solver_dir is not None or secrets):
        raise BadRequest(
            f"--solver-dir and --solver-env are for a command solver (e.g. --solver '{SOLVER_DIR}/bin/my-agent'), "
            f"not {spec.label}"
        )
    if spec.kind == "gold":
        inner = gold_solver(str(suite_dir))
    elif spec.kind == "none":
        inner = none_solver()
    elif spec.kind == "cmd":
        assert spec.command is not None
        inner = cmd_solver(spec.command, timeout_s, str(solver_dir) if solver_dir else None, secrets)
        return bounded(inner, timeout_s, grace_s=CMD_GRACE_S)
    else:
        inner = agent_solver(bash_timeout_s=max(1, min(180, int(timeout_s))))
    return bounded(inner, timeout_s)
