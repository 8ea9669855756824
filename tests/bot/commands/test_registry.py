"""Declarations, the Registry, labbot's own subcommands and `/lab help` generated from them."""

from __future__ import annotations

import pytest

from labbot.bot.commands import (
    COMMANDS,
    LAB,
    RUN_STATUSES,
    Arg,
    Command,
    Option,
    Parsed,
    Permission,
    Registry,
    help_text,
    lab_registry,
    parse,
    subcommands_usage,
    usage,
)

PURGE = Command("purge", "delete old runs", permission=Permission.ADMIN, aliases=("gc",))


def with_admin() -> Registry:
    registry = lab_registry()
    registry.register(PURGE)
    return registry


# --- declarations ------------------------------------------------------------------------------------------------


def test_option_key_and_metavar() -> None:
    opt = Option("--stall-after", "duration", "h")
    assert (opt.key, opt.metavar, opt.default, opt.takes_value) == ("stall_after", "DUR", None, True)
    flag = Option("--mine", "flag", "h")
    assert (flag.default, flag.takes_value) == (False, False)
    assert Option("--name", "str", "h", metavar="N").metavar == "N"


def test_command_option_lookup_accepts_underscores_and_case() -> None:
    cmd = COMMANDS[0]
    assert cmd.option("--Stall_After") is cmd.option("--stall-after") is not None
    assert cmd.option("--nope") is None


@pytest.mark.parametrize(
    "build",
    [
        lambda: Arg("Run", "run_id", "h"),
        lambda: Arg("x", "flag", "h"),
        lambda: Arg("x", "bogus", "h"),  # type: ignore[arg-type]
        lambda: Option("gpus", "int", "h"),
        lambda: Option("--help", "flag", "h"),
        lambda: Option("--x", "text", "h"),
        lambda: Option("--x", "flag", "h", default=True),
        lambda: Command("Launch", "s"),
        lambda: Command("x", "s", aliases=("x",)),
        lambda: Command("x", "s", args=(Arg("a", "str", "h"), Arg("a", "str", "h"))),
        lambda: Command("x", "s", options=(Option("--a", "str", "h"), Option("--a", "int", "h"))),
        lambda: Command("x", "s", args=(Arg("a", "str", "h", required=False), Arg("b", "str", "h"))),
        lambda: Command("x", "s", args=(Arg("q", "text", "h"),), accepts_params=True),
        lambda: Command("x", "s", args=(Arg("a", "str", "h"), Arg("q", "text", "h"))),
    ],
)
def test_bad_declarations_are_rejected(build: object) -> None:
    with pytest.raises(ValueError):
        build()  # type: ignore[operator]


# --- the registry ------------------------------------------------------------------------------------------------


def test_resolve_names_and_aliases_case_insensitively() -> None:
    assert LAB.resolve("launch") is LAB.resolve("LAUNCH") is LAB.resolve(" Launch ")
    assert LAB.resolve("ls") is LAB.resolve("runs")
    assert LAB.resolve("SHOW") is LAB.resolve("run") is LAB.resolve("status")
    assert LAB.resolve("?") is LAB.resolve("help")
    assert LAB.resolve("nope") is None
    assert "LS" in LAB and "nope" not in LAB and 3 not in LAB


EVAL_COMMANDS = (
    "eval-generate",
    "eval-run",
    "eval-list",
    "eval-show",
    "eval-compare",
    "eval-share",
    "eval-from-incident",
    "eval-from-feedback",
)


def test_registration_order_and_words() -> None:
    names = [
        "launch",
        "runs",
        "status",
        "stop",
        "restart",
        "logs",
        "pages",
        "ack",
        "resolve",
        "ask",
        "artifacts",
        "report",
        *EVAL_COMMANDS,
        "feedback",
        "ab",
        "compare",
        "sweep",
        "experiments",
        "experiment",
        "research",
        "capacity",
        "priority",
        "help",
    ]
    assert [c.name for c in LAB] == names
    assert [c.name for c in COMMANDS] == names
    assert len(LAB) == 30
    assert LAB.words()[: len(names)] == [c.name for c in LAB]
    assert {"ls", "run", "show", "?"} <= set(LAB.words())


@pytest.mark.parametrize(
    "clash",
    [
        Command("launch", "again"),
        Command("pages", "again"),
        Command("list", "l", aliases=("ls",)),  # alias already taken by runs
        Command("ls", "l"),  # name already an alias
        Command("x", "x", aliases=("show",)),
    ],
)
def test_register_rejects_duplicate_names_and_aliases(clash: Command) -> None:
    registry = lab_registry()
    with pytest.raises(ValueError, match="already taken"):
        registry.register(clash)
    assert len(registry) == len(COMMANDS) and registry.resolve(clash.name) is not clash


def test_new_subcommands_plug_in_without_touching_lab() -> None:
    registry = lab_registry()
    evals = registry.register(Command("evals", "a run's evals", args=(Arg("run_id", "run_id", "h"),)))
    assert registry.resolve("evals") is evals
    assert LAB.resolve("evals") is None
    assert len(registry) == len(LAB) + 1
    result = parse("evals k3xq7p", registry)
    assert isinstance(result, Parsed) and result.command is evals


def test_closest() -> None:
    assert LAB.closest("lanch") == "launch"
    assert LAB.closest("RESTRAT") == "restart"
    assert LAB.closest("zzzz") is None
    assert with_admin().closest("purg") == "purge"
    assert with_admin().closest("purg", include_admin=False) is None


# --- labbot's subcommands ----------------------------------------------------------------------------------------


def test_usage_lines() -> None:
    lines = {c.name: usage(c) for c in LAB}
    assert lines == {
        "launch": (
            "/lab launch JOB [--name N] [--gpus N] [--stall-after DUR] [--pending-after DUR] [--max-restarts N]"
            " [--alert WORDS] [--watch K=V] [--remedy WORDS] [--cpus N] [--resources K=V] [--purpose P] [--no-queue]"
            " [KEY=VALUE ...]"
        ),
        "runs": "/lab runs [--status S] [--mine] [--limit N]",
        "status": "/lab status RUN_ID",
        "stop": "/lab stop RUN_ID",
        "restart": "/lab restart RUN_ID",
        "logs": "/lab logs RUN_ID [--tail N]",
        "pages": "/lab pages [--all] [--run RUN_ID]",
        "ack": "/lab ack PAGE",
        "resolve": "/lab resolve PAGE [--cause TEXT]",
        "ask": "/lab ask QUESTION ...",
        "artifacts": "/lab artifacts [ARTIFACT]",
        "report": "/lab report RUN_ID",
        "eval-generate": "/lab eval generate [--count N] [--seed N] [--deletion D] [--deletions N] [--prefer P]",
        "eval-run": (
            "/lab eval run SUITE [--solver S] [--max-samples N] [--solver-dir NAME] [--allow-host HOSTS] [--judge M]"
        ),
        "eval-list": "/lab eval list",
        "eval-show": "/lab eval show RUN_ID",
        "eval-compare": "/lab eval compare RUN_A RUN_B",
        "eval-share": "/lab eval share SUITE",
        "eval-from-incident": "/lab eval from-incident PAGE",
        "eval-from-feedback": "/lab eval from-feedback FEEDBACK",
        "feedback": "/lab feedback [--down] [--mine] [--limit N]",
        "ab": "/lab ab",
        "compare": "/lab compare RUN_A RUN_B [--metric M] [--better W] [--window N]",
        "sweep": (
            "/lab sweep JOB [--metric M] [--goal G] [--trials N] [--concurrency N] [--seeds N] [--search S]"
            " [--prune P] [--budget B] [--at STEP] [--name N] [--purpose P] [--search-seed N] [--plan] [KEY=VALUE ...]"
        ),
        "experiments": "/lab experiments",
        "experiment": "/lab experiment EXPERIMENT [ACTION] [TRIAL]",
        "research": "/lab research QUESTION ...",
        "capacity": "/lab capacity",
        "priority": "/lab priority RUN_ID PRIORITY",
        "help": "/lab help [COMMAND]",
    }
    assert usage(COMMANDS[3], "/ml") == "/ml stop RUN_ID"


def test_permissions_and_params() -> None:
    perms = {c.name: c.permission for c in LAB}
    assert perms == {
        "launch": Permission.ANYONE,
        "runs": Permission.ANYONE,
        "status": Permission.ANYONE,
        "stop": Permission.OWNER,
        "restart": Permission.OWNER,
        "logs": Permission.ANYONE,
        "pages": Permission.ANYONE,
        "ack": Permission.ANYONE,
        "resolve": Permission.ANYONE,
        "ask": Permission.ANYONE,
        "artifacts": Permission.ANYONE,
        "report": Permission.ANYONE,
        **dict.fromkeys(EVAL_COMMANDS, Permission.ANYONE),
        "feedback": Permission.ANYONE,
        "ab": Permission.ANYONE,
        "compare": Permission.ANYONE,
        "sweep": Permission.ANYONE,
        "experiments": Permission.ANYONE,
        "experiment": Permission.ANYONE,  # showing it; its owner (or an admin) pauses, resumes and stops it
        "research": Permission.ANYONE,  # anyone asks; the asker owns the question and approves its plan
        "capacity": Permission.ANYONE,
        "priority": Permission.ADMIN,
        "help": Permission.ANYONE,
    }
    assert [c.name for c in LAB if c.accepts_params] == ["launch", "sweep"]
    assert Permission.OWNER == "owner"


def test_every_example_parses_to_its_own_command() -> None:
    for cmd in LAB:
        assert cmd.examples, cmd.name
        for example in cmd.examples:
            result = parse(example, LAB)
            assert isinstance(result, Parsed), (example, result)
            assert result.command is cmd


def test_run_statuses_match_storage() -> None:
    from labbot.storage.models import RunStatus

    assert tuple(s.value for s in RunStatus) == RUN_STATUSES


# --- help --------------------------------------------------------------------------------------------------------


def test_help_lists_every_subcommand_with_usage_and_summary() -> None:
    text = help_text(LAB, is_admin=False)
    for cmd in LAB:
        if cmd.permission == Permission.ADMIN:  # an admin's command is in an admin's help only
            assert f"`{usage(cmd)}`" not in text
            assert f"• `{usage(cmd)}` — {cmd.summary}" in help_text(LAB, is_admin=True)
            continue
        assert f"• `{usage(cmd).replace('&', '&amp;')}` — {cmd.summary}" in text
    assert "`/lab help SUBCOMMAND`" in text


def test_help_hides_admin_commands_from_non_admins() -> None:
    registry = with_admin()
    assert "purge" not in help_text(registry, is_admin=False)
    assert "`/lab purge` — delete old runs (admin) (also `gc`)" in help_text(registry, is_admin=True)
    assert "purge" not in subcommands_usage(registry)
    assert "purge" in subcommands_usage(registry, is_admin=True)


def test_help_marks_owner_commands_for_everyone() -> None:
    for is_admin in (False, True):
        lines = help_text(LAB, is_admin=is_admin).splitlines()
        stop = next(line for line in lines if "/lab stop" in line)
        assert stop.endswith("(run owner or admin)")
        launch = next(line for line in lines if "/lab launch" in line)
        assert "(run owner or admin)" not in launch


def test_help_topic_gives_detail() -> None:
    text = help_text(LAB, is_admin=False, topic="launch")
    assert text.splitlines()[0] == f"*`{usage(LAB.resolve('launch'))}`*"  # type: ignore[arg-type]
    for part in ("Who: anyone", "*Arguments*", "`JOB`", "*Options*", "`--stall-after DUR`", "*Parameters*"):
        assert part in text
    assert "• `/lab launch tiny-lm steps=200 lr=3e-4`" in text
    runs = help_text(LAB, is_admin=False, topic="LS")
    assert "(default: 20)" in runs and "Also: `/lab ls`" in runs
    assert "Who: the run's owner or an admin" in help_text(LAB, is_admin=False, topic="stop")
    assert "(optional)" in help_text(LAB, is_admin=False, topic="help")


def test_help_topic_unknown_or_hidden() -> None:
    text = help_text(LAB, is_admin=False, topic="lanch")
    assert text.startswith("unknown subcommand 'lanch' — did you mean 'launch'?")
    assert "`/lab runs" in text
    registry = with_admin()
    hidden = help_text(registry, is_admin=False, topic="purge")
    assert hidden.startswith("unknown subcommand 'purge'")
    assert "did you mean 'purge'" not in hidden and "/lab purge" not in hidden
    assert "did you mean" not in help_text(registry, is_admin=False, topic="gc")
    assert "did you mean" not in help_text(registry, is_admin=False, topic="xyzzy")
    assert help_text(registry, is_admin=True, topic="gc").startswith("*`/lab purge`*")
    assert help_text(LAB, is_admin=False, topic="  ") == help_text(LAB, is_admin=False)


def test_help_renamed_and_footer() -> None:
    text = help_text(LAB, is_admin=False, command_name="/ml", footer=["Notion: off (set NOTION_TOKEN)", "Linear: on"])
    assert "/lab" not in text
    assert "`/ml stop RUN_ID`" in text
    assert text.splitlines()[-2:] == ["Notion: off (set NOTION_TOKEN)", "Linear: on"]
    assert "a run id, as `/ml runs` lists them" in help_text(LAB, is_admin=False, command_name="/ml", topic="stop")


def test_help_escapes_mrkdwn_specials() -> None:
    registry = Registry([Command("x", "a <b> & c")])
    assert "a &lt;b&gt; &amp; c" in help_text(registry, is_admin=False)
