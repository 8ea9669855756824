"""The /lab parser: Slack-tolerant tokenising, typed values, every usage error, and properties (never raises;
render round-trips)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labbot.bot.commands import LAB, Command, Option, Parsed, Registry, UsageError, lab_registry, parse, render
from labbot.bot.commands.tokens import TokenError, quote, tokenize, unwrap_slack
from labbot.bot.commands.values import RUN_STATUSES, BadValue, convert, to_text


def ok(text: str, registry: Registry = LAB) -> Parsed:
    result = parse(text, registry)
    assert isinstance(result, Parsed), result
    return result


def err(text: str, registry: Registry = LAB, command_name: str = "/lab") -> UsageError:
    result = parse(text, registry, command_name=command_name)
    assert isinstance(result, UsageError), result
    return result


# --- tokenising what Slack sends ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("  launch   tiny-lm  ", ["launch", "tiny-lm"]),
        ("launch\ttiny-lm\n", ["launch", "tiny-lm"]),
        ('launch --name "my run"', ["launch", "--name", "my run"]),
        ("launch --name “my run”", ["launch", "--name", "my run"]),
        ("launch --name ‘my run’", ["launch", "--name", "my run"]),
        ("launch --name „my run“", ["launch", "--name", "my run"]),
        ('launch --name "mixed”', ["launch", "--name", "mixed"]),
        ("note=don’t stop", ["note=don’t", "stop"]),
        ("“it’s fine”", ["it’s fine"]),
        ("'“kept” ‘as is’'", ["“kept” ‘as is’"]),
        ("<http://example.com|example.com>", ["example.com"]),
        ("<https://example.com/a?b=1>", ["https://example.com/a?b=1"]),
        ("<mailto:ann@example.com|ann@example.com>", ["ann@example.com"]),
        ("url=<http://x.io/y|x.io/y> other", ["url=x.io/y", "other"]),
        ("a&amp;b &lt;c&gt;", ["a&b", "<c>"]),
        ("&amp;lt;", ["&lt;"]),
        ("a\u00a0b\u202fc\u2009d", ["a", "b", "c", "d"]),
        ("la\u200bunch", ["launch"]),
        ("launch —gpus 2 –name x", ["launch", "--gpus", "2", "--name", "x"]),
        ("a—b x — y", ["a—b", "x", "—", "y"]),
        ("'—gpus'", ["—gpus"]),
        (r"a\ b", ["a b"]),
        ("#not-a-comment", ["#not-a-comment"]),
        ("", []),
    ],
)
def test_tokenize(text: str, words: list[str]) -> None:
    assert tokenize(text) == words


@pytest.mark.parametrize("text", ['launch "x', "launch 'x", "launch “x", "launch ‘x", "x\\"])
def test_tokenize_rejects_unbalanced_quotes_and_dangling_backslash(text: str) -> None:
    with pytest.raises(TokenError):
        tokenize(text)


def test_unwrap_slack_decodes_entities_once() -> None:
    assert unwrap_slack("&amp;amp; <@U123|ann> <#C1|general> <!here>") == "&amp; ann general !here"


@given(st.text())
def test_quote_is_read_back_exactly(word: str) -> None:
    assert tokenize(quote(word)) == [word]


# --- typed values ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "raw", "value"),
    [
        ("int", "10", 10),
        ("int", "+3", 3),
        ("float", "0.5", 0.5),
        ("float", "1e3", 1000.0),
        ("float", ".5", 0.5),
        ("duration", "1h30m", "1h30m"),
        ("duration", "30S", "30S"),
        ("run_id", "K3XQ7P", "k3xq7p"),
        ("status", "Running", "running"),
        ("job", "tiny-lm", "tiny-lm"),
        ("str", "any thing", "any thing"),
    ],
)
def test_convert(kind: str, raw: str, value: object) -> None:
    assert convert(kind, raw) == value
    assert convert(kind, to_text(kind, value)) == value


@pytest.mark.parametrize(
    ("kind", "raw"),
    [
        ("int", "1.5"),
        ("int", "1_000"),
        ("int", "٣"),
        ("int", ""),
        ("float", "nan"),
        ("float", "inf"),
        ("float", "1e999"),
        ("float", "1_0"),
        ("duration", "5x"),
        ("duration", "0s"),
        ("duration", ""),
        ("run_id", ""),
        ("run_id", "a_b"),
        ("run_id", "a b"),
        ("status", "done"),
        ("job", "-x"),
        ("job", "a=b"),
    ],
)
def test_convert_rejects(kind: str, raw: str) -> None:
    with pytest.raises(BadValue):
        convert(kind, raw)


def test_minimum() -> None:
    assert convert("int", "0", minimum=0) == 0
    with pytest.raises(BadValue, match="at least 1"):
        convert("int", "0", minimum=1)
    with pytest.raises(BadValue, match=r"at least 0\.5"):
        convert("float", "0.25", minimum=0.5)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_text_round_trips(x: float) -> None:
    assert convert("float", to_text("float", x)) == x


# --- parsing: the happy paths ------------------------------------------------------------------------------------


def test_launch_full() -> None:
    p = ok(
        "launch tiny-lm steps=100 lr=3e-4 --name baseline --gpus 0.5 --stall-after 10m --pending-after 5m"
        " --max-restarts 2 --alert 'pass_rate below 0.2 for 10m; reward flat for 15m' --watch kl_max=5"
        " --remedy 'diverged: lr *= 0.5; max 2'"
    )
    assert p.command.name == "launch"
    assert p.args == {"job": "tiny-lm"}
    assert p.options == {
        "name": "baseline",
        "gpus": 0.5,
        "stall_after": "10m",
        "pending_after": "5m",
        "max_restarts": 2,
        "alert": "pass_rate below 0.2 for 10m; reward flat for 15m",
        "watch": "kl_max=5",
        "remedy": "diverged: lr *= 0.5; max 2",
        "cpus": None,
        "resources": None,
        "purpose": None,
        "no_queue": False,
    }
    assert p.params == {"steps": "100", "lr": "3e-4"}
    assert list(p.params) == ["steps", "lr"]


def test_launch_with_a_purpose_cpus_and_no_queue_and_the_compute_commands() -> None:
    p = ok("launch tiny-lm --purpose research --cpus 2 --no-queue")
    assert (p.options["purpose"], p.options["cpus"], p.options["no_queue"]) == ("research", 2.0, True)
    assert ok("launch tiny-lm --resources accelerator=1,ssd=2").options["resources"] == "accelerator=1,ssd=2"
    assert ok("priority K3XQ7P 10").args == {"run_id": "k3xq7p", "priority": 10}
    assert ok("capacity").command.name == "capacity"
    assert "PRIORITY" in err("priority k3xq7p").message
    assert "a whole number" in err("priority k3xq7p high").message


def test_options_default_when_absent() -> None:
    assert ok("launch tiny-lm").options == {
        "name": None,
        "gpus": None,
        "stall_after": None,
        "pending_after": None,
        "max_restarts": None,
        "alert": None,
        "watch": None,
        "remedy": None,
        "cpus": None,
        "resources": None,
        "purpose": None,
        "no_queue": False,
    }
    assert ok("runs").options == {"status": None, "mine": False, "limit": 20}
    assert ok("logs ab12").options == {"tail": None}
    assert ok("pages").options == {"all": False, "run": None}


@pytest.mark.parametrize(
    "text",
    [
        "launch tiny-lm --gpus=2 --stall-after=90s",
        "launch tiny-lm --gpus 2 --stall_after 90s",
        "launch --GPUS 2 tiny-lm --Stall_After=90s",
        "LAUNCH tiny-lm —gpus 2 —stall-after 90s",
        "  launch    tiny-lm   --gpus   2   --stall-after   90s  ",
    ],
)
def test_flag_spellings(text: str) -> None:
    p = ok(text)
    assert (p.args["job"], p.options["gpus"], p.options["stall_after"]) == ("tiny-lm", 2.0, "90s")


def test_duration_keeps_the_original_string() -> None:
    assert ok("launch tiny-lm --stall-after 1H30m").options["stall_after"] == "1H30m"


def test_param_values_keep_everything_after_the_first_equals() -> None:
    p = ok("launch tiny-lm expr=a=b empty= 'msg=hello world' url=<http://x.io|x.io>")
    assert p.params == {"expr": "a=b", "empty": "", "msg": "hello world", "url": "x.io"}


@pytest.mark.parametrize(
    ("text", "name", "args"),
    [
        ("ls", "runs", {}),
        ("LS --mine", "runs", {}),
        ("run ab12", "status", {"run_id": "ab12"}),
        ("Show AB12", "status", {"run_id": "ab12"}),
        ("? launch", "help", {"command": "launch"}),
        ("status k3xq7p", "status", {"run_id": "k3xq7p"}),
    ],
)
def test_aliases_and_case(text: str, name: str, args: dict[str, str]) -> None:
    p = ok(text)
    assert p.command.name == name
    assert p.args == {**{a.name: None for a in p.command.args}, **args}


@pytest.mark.parametrize("text", ["", "   ", "help", "--help", "-h", "?", "\u200b"])
def test_empty_text_and_help_flags_mean_help(text: str) -> None:
    p = ok(text)
    assert (p.command.name, p.args) == ("help", {"command": None})


@pytest.mark.parametrize("text", ["stop --help", "stop -h", "launch tiny-lm --help", "help stop"])
def test_subcommand_help_flag_is_help_on_that_subcommand(text: str) -> None:
    p = ok(text)
    assert p.command.name == "help"
    assert p.args["command"] in ("stop", "launch")


def test_status_filter_and_flags() -> None:
    p = ok("runs --status STALLED --mine --limit 5")
    assert p.options == {"status": "stalled", "mine": True, "limit": 5}


def test_double_dash_ends_options() -> None:
    assert ok("help -- --weird").args == {"command": "--weird"}
    assert ok("launch -- tiny-lm k=--v").params == {"k": "--v"}


def test_option_value_may_start_with_a_single_dash_or_use_equals() -> None:
    assert ok("launch t --name -x").options["name"] == "-x"
    assert ok("launch t --name=--x").options["name"] == "--x"


def test_slack_link_in_run_id_and_quoted_job() -> None:
    assert ok("status <http://ab12|ab12>").args == {"run_id": "ab12"}
    assert ok("launch “tiny-lm” --name “nightly run”").options["name"] == "nightly run"


def test_pages_ack_and_resolve() -> None:
    ack = ok("ack p2x3kq")
    assert (ack.command.name, ack.args, ack.options, ack.params) == ("ack", {"page": "p2x3kq"}, {}, {})
    assert ok("resolve p2x3kq").args == {"page": "p2x3kq"}
    pages = ok("pages --all --run k3xq7p")
    assert pages.command.name == "pages"
    assert (pages.args, pages.options) == ({}, {"all": True, "run": "k3xq7p"})
    assert ok("pages --run K3XQ7P").options == {"all": False, "run": "k3xq7p"}
    missing = err("ack")
    assert missing.message == "`/lab ack` needs PAGE"
    assert missing.command is not None and missing.command.name == "ack"
    assert missing.usage == "/lab ack PAGE"
    assert err("resolve").message == "`/lab resolve` needs PAGE"


def test_permission_is_recorded_not_enforced() -> None:
    assert ok("stop ab12").command.permission == "owner"
    assert ok("restart ab12").command.permission == "owner"
    assert ok("logs ab12").command.permission == "anyone"


# --- parsing: every usage error ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lanch tiny-lm", "unknown subcommand 'lanch' — did you mean 'launch'?"),
        ("stpo ab12", "unknown subcommand 'stpo' — did you mean 'stop'?"),
        ("frobnicate", "unknown subcommand 'frobnicate'"),
        ("stop", "`/lab stop` needs RUN_ID"),
        ("launch --gpus 1", "`/lab launch` needs JOB"),
        ("stop ab12 cd34", "unexpected extra argument 'cd34' — `/lab stop` takes only RUN_ID"),
        ("runs x y", "unexpected extra arguments 'x', 'y' — `/lab runs` takes no arguments"),
        (
            "launch tiny-lm steps 100",
            "unexpected extra arguments 'steps', '100' — `/lab launch` takes only JOB"
            " (parameters are written KEY=VALUE)",
        ),
        (
            "runs --limt 5",
            "unknown option '--limt' for `/lab runs` (did you mean --limit?) — it accepts --status, --mine, --limit",
        ),
        ("runs --zzz", "unknown option '--zzz' for `/lab runs` — it accepts --status, --mine, --limit"),
        ("stop ab12 --force", "`/lab stop` takes no options, got '--force'"),
        ("ack p1 p2", "unexpected extra argument 'p2' — `/lab ack` takes only PAGE"),
        ("pages --all=yes", "`--all` takes no value, got '--all=yes'"),
        ("pages --run a_b", "`--run` expects a run id: letters, digits and '-', got 'a_b'"),
        ("runs --limit", "`--limit` needs a value (N)"),
        ("runs --limit --mine", "`--limit` needs a value (N)"),
        ("runs --limit ten", "`--limit` expects a whole number, got 'ten'"),
        ("runs --limit 0", "`--limit` expects a whole number of at least 1, got '0'"),
        ("runs --limit 5 --limit 6", "`--limit` given twice"),
        ("runs --mine=yes", "`--mine` takes no value, got '--mine=yes'"),
        ("runs --status done", "`--status` expects a run status, one of " + "|".join(RUN_STATUSES) + ", got 'done'"),
        ("launch t --gpus lots", "`--gpus` expects a finite number, got 'lots'"),
        ("launch t --gpus=-1", "`--gpus` expects a number of at least 0, got '-1'"),
        ("launch t --max-restarts 1.5", "`--max-restarts` expects a whole number, got '1.5'"),
        ("logs ab12 --tail -5", "`--tail` expects a whole number of at least 1, got '-5'"),
        ("stop ab_12", "`RUN_ID` expects a run id: letters, digits and '-', got 'ab_12'"),
        ("launch t steps=1 steps=2", "parameter 'steps' given twice"),
        ("status ab12 x=1", "`/lab status` takes no KEY=VALUE parameters, got 'x=1'"),
        ('launch x "unbalanced', "unbalanced quote: close it, or remove it"),
        ("stop ab12 “oops", "unbalanced quote: close it, or remove it"),
    ],
)
def test_usage_errors(text: str, message: str) -> None:
    assert err(text).message == message


def test_bad_duration_names_what_is_accepted() -> None:
    e = err("launch t --stall-after '5 minutes'")
    assert e.message.startswith("`--stall-after` expects a positive duration")
    assert "30s, 10m, 1h30m" in err("launch t --stall-after soon").message
    assert err("launch t --pending-after soon").message.startswith("`--pending-after` expects a positive duration")


@pytest.mark.parametrize("item", ["1x=2", "=5", "a b=1", "-k=1", "k.x=1"])
def test_bad_param_keys(item: str) -> None:
    assert err(f"launch t {quote(item)}").message.startswith(f"bad parameter {item!r}: write KEY=VALUE")


def test_usage_error_carries_the_command_and_its_usage_line() -> None:
    e = err("launch --bogus")
    assert e.command is not None and e.command.name == "launch"
    assert e.usage == (
        "/lab launch JOB [--name N] [--gpus N] [--stall-after DUR] [--pending-after DUR] [--max-restarts N]"
        " [--alert WORDS] [--watch K=V] [--remedy WORDS] [--cpus N] [--resources K=V] [--purpose P] [--no-queue]"
        " [KEY=VALUE ...]"
    )
    unknown = err("nope")
    assert unknown.command is None
    assert unknown.usage.startswith("/lab SUBCOMMAND")
    assert (
        "launch, runs, status, stop, restart, logs, pages, ack, resolve, ask, artifacts, report, "
        "eval generate|run|list|show|compare|share|from-incident|from-feedback, feedback, ab, compare, sweep, "
        "experiments, experiment, research, capacity, help" in unknown.usage
    )


def test_unbalanced_quote_after_a_known_subcommand_gives_its_usage() -> None:
    e = err("logs ab12 --tail '5")
    assert e.command is not None and e.command.name == "logs"
    assert e.usage == "/lab logs RUN_ID [--tail N]"


def test_renamed_slash_command() -> None:
    e = err("stop", command_name="/ml")
    assert (e.message, e.usage) == ("`/ml stop` needs RUN_ID", "/ml stop RUN_ID")
    assert err("nope", command_name="/ml").usage.startswith("/ml SUBCOMMAND")


def test_registry_without_help_says_a_subcommand_is_missing() -> None:
    e = err("", Registry([Command("ping", "pong")]))
    assert e.message == "no subcommand given"


# --- free text (`ask QUESTION ...`) ------------------------------------------------------------------------------

WITH_ASK = lab_registry()  # `ask` is one of labbot's own subcommands now


def test_text_argument_takes_the_rest_verbatim() -> None:
    p = ok("ask why isn't   run ab12 “converging”? see <http://x.io|x.io> &amp; more ", WITH_ASK)
    assert p.args == {"question": "why isn't   run ab12 “converging”? see x.io & more"}
    assert render(p) == "/lab ask why isn't   run ab12 “converging”? see x.io &amp; more"
    assert ok("'ask' two words", WITH_ASK).args == {"question": "two words"}


def test_text_argument_required_and_help() -> None:
    assert err("ask   ", WITH_ASK).message == "`/lab ask` needs QUESTION"
    assert ok("ask --help", WITH_ASK).args == {"command": "ask"}
    assert err("ask", WITH_ASK).usage == "/lab ask QUESTION ..."


# --- render and properties ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("launch tiny-lm steps=100 --gpus=1", "/lab launch tiny-lm --gpus 1 steps=100"),
        ("ls --mine", "/lab runs --mine"),
        ("runs --limit 20", "/lab runs"),
        ("launch t --name “a & b”", "/lab launch t --name 'a &amp; b'"),
        ("launch t --name=--x 'msg=hi there'", "/lab launch t --name=--x 'msg=hi there'"),
        ("help -- -x", "/lab help -- -x"),
        ("", "/lab help"),
    ],
)
def test_render(text: str, rendered: str) -> None:
    assert render(ok(text)) == rendered
    assert render(ok(text), "") == rendered.removeprefix("/lab ")


WORDS = [
    *(w for c in WITH_ASK for w in (c.name, *c.aliases)),
    *(o.flag for c in LAB for o in c.options),
    "--stall_after=10m", "--gpus=0.5", "--limit=3", "--", "-h", "--help", "--bogus",
    "tiny-lm", "AB12", "k3xq7p", "running", "10m", "1h30m", "0", "7", "-3", "2.5", "nan",
    "steps=100", "lr=3e-4", "x=", "=y", "a b", "“q”", "‘q’", "'", '"', "\\", "<http://x.io|x.io>", "&amp;", "—gpus",
]  # fmt: skip
texts = st.one_of(st.text(), st.lists(st.sampled_from(WORDS), max_size=8).map(" ".join))


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_parse_never_raises(text: str) -> None:
    result = parse(text, WITH_ASK)
    assert isinstance(result, Parsed | UsageError)
    if isinstance(result, UsageError):
        assert result.message and result.usage


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_any_parsed_round_trips(text: str) -> None:
    result = parse(text, WITH_ASK)
    if isinstance(result, Parsed):
        assert parse(render(result, ""), WITH_ASK) == result
        assert render(result).startswith(f"/lab {result.command.name}")


safe_text = st.text()


@st.composite
def launches(draw: st.DrawFn) -> Parsed:
    """Launch invocations built directly from values, not from text."""
    cmd = LAB.resolve("launch")
    assert cmd is not None
    job = draw(st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,12}", fullmatch=True))
    keys = draw(st.lists(st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True), unique=True, max_size=4))
    gpus = draw(st.none() | st.floats(min_value=0, allow_infinity=False))
    restarts = draw(st.none() | st.integers(min_value=0))
    durations = st.none() | st.sampled_from(["30s", "10m", "1h30m", "2.5h", "90"])
    options = {
        "name": draw(st.none() | safe_text),
        "gpus": gpus,
        "stall_after": draw(durations),
        "pending_after": draw(durations),
        "max_restarts": restarts,
        "alert": draw(st.none() | safe_text),
        "watch": draw(st.none() | safe_text),
        "remedy": draw(st.none() | safe_text),
        "cpus": draw(st.none() | st.floats(min_value=0, allow_infinity=False)),
        "resources": draw(st.none() | safe_text),
        "purpose": draw(st.none() | st.sampled_from(["training", "eval", "data", "research", "serving"])),
        "no_queue": draw(st.booleans()),
    }
    return Parsed(cmd, {"job": job}, options, {k: draw(safe_text) for k in keys})


@given(launches())
def test_generated_launches_round_trip(p: Parsed) -> None:
    again = parse(render(p, ""), LAB)
    assert again == p


def test_round_trip_keeps_negative_zero_and_large_numbers() -> None:
    p = ok("launch t --gpus 1e300 --max-restarts 123456789012345678901234567890")
    assert parse(render(p, ""), LAB) == p
    assert math.isclose(p.options["gpus"], 1e300)
    z = ok("launch t --gpus -0")
    assert math.copysign(1, z.options["gpus"]) == -1
    assert parse(render(z, ""), LAB) == z


def test_option_declared_value_kinds_all_parse() -> None:
    cmd = Command("t", "t", options=(Option("--n", "int", "n"), Option("--f", "flag", "f")))
    p = ok("t --n 3 --f", Registry([cmd]))
    assert p.options == {"n": 3, "f": True}


def test_a_two_word_subcommand_is_named_as_typed_and_eval_generate_says_where_a_path_goes() -> None:
    got = parse("eval generate ~/src/other", LAB)
    assert isinstance(got, UsageError)
    assert "`/lab eval generate` takes no arguments" in got.message and "eval-generate" not in got.message
    assert "`labbot eval generate PATH`" in got.message
