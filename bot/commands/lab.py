"""The declarations of labbot's ``/lab`` subcommands, mirroring the ``labbot`` CLI, and ``LAB``, the default registry.

A new subcommand is declared the same way and appended to ``COMMANDS`` here (or added to a registry with
``registry.register(cmd)``); its handler is named in ``HANDLERS`` (``labbot.bot.slack.handlers.registry``), which
refuses at import a command without one. Help strings may say ``{cmd}`` for the slash command's (renamable) name.
"""

from __future__ import annotations

from labbot.bot.commands.registry import Arg, Command, Option, Permission, Registry
from labbot.bot.commands.values import RUN_STATUSES

PURPOSES = ("training", "eval", "data", "research", "serving")  # labbot.training.specs.PURPOSES, kept import-light

RUN_ID = Arg("run_id", "run_id", "a run id, as `{cmd} runs` lists them")

LAUNCH = Command(
    "launch",
    "launch a job on Ray",
    args=(Arg("job", "job", "the job to run, e.g. tiny-lm"),),
    options=(
        Option("--name", "str", "a name for the run (default: JOB-ID)", metavar="N"),
        Option("--gpus", "float", "GPUs for the job's entrypoint (default: the job's)", minimum=0),
        Option("--stall-after", "duration", "no progress for this long is a stall, e.g. 30s, 10m (default: the job's)"),
        Option("--pending-after", "duration", "PENDING in Ray this long is a page, e.g. 5m (default: 10m)"),
        Option("--max-restarts", "int", "automatic restarts before paging a human (default: the job's)", minimum=0),
        Option(
            "--alert",
            "str",
            "metric alerts, ';' between two: 'pass_rate below 0.2 for 10m; reward flat for 15m warning'",
            metavar="WORDS",
        ),
        Option("--watch", "str", "RL watchdog thresholds for this run: 'kl_max=5 entropy_floor=0.1'", metavar="K=V"),
        Option(
            "--remedy",
            "str",
            "roll back and restart with changed parameters instead of paging, '|' between two: "
            "'entropy_collapse: temperature += 1.0; max 2 | kl_blowup: lr *= 0.1'",
            metavar="WORDS",
        ),
        Option("--cpus", "float", "CPUs for the job's entrypoint (default: the job's)", minimum=0),
        Option(
            "--resources",
            "str",
            "custom node resources the job needs, e.g. 'accelerator=1' (',' between two; over the job's)",
            metavar="K=V",
        ),
        Option("--purpose", "str", f"what it is for: {'|'.join(PURPOSES)} (default: the job's)", metavar="P"),
        Option("--no-queue", "flag", "over its purpose's [compute] cap: refuse with the numbers instead of waiting"),
    ),
    accepts_params=True,
    examples=(
        "launch tiny-lm",
        "launch tiny-lm steps=200 lr=3e-4",
        "launch tiny-lm --gpus 1 --stall-after 10m",
        "launch tiny-rl algo=sdpo --alert 'pass_rate below 0.3 for 10m'",
        "launch tiny-rl --remedy 'entropy_collapse: temperature += 1.0; max 2'",
        "launch tiny-lm --purpose research --no-queue",
        "launch tiny-lm --resources accelerator=1",
    ),
)

RUNS = Command(
    "runs",
    "list runs, newest first",
    options=(
        Option("--status", "status", f"only runs in this status: {'|'.join(RUN_STATUSES)}", metavar="S"),
        Option("--mine", "flag", "only runs you launched"),
        Option("--limit", "int", "at most this many runs", default=20, minimum=1),
    ),
    aliases=("ls",),
    examples=("runs", "runs --status running --mine", "ls --limit 5"),
)

STATUS = Command(
    "status",
    "a run's status, step and latest metrics",
    args=(RUN_ID,),
    aliases=("run", "show"),
    examples=("status k3xq7p",),
)

STOP = Command(
    "stop",
    "stop a run",
    args=(RUN_ID,),
    permission=Permission.OWNER,
    examples=("stop k3xq7p",),
)

RESTART = Command(
    "restart",
    "restart a run as a new attempt, resuming from its newest checkpoint",
    args=(RUN_ID,),
    permission=Permission.OWNER,
    examples=("restart k3xq7p",),
)

LOGS = Command(
    "logs",
    "a run's logs from Ray",
    args=(RUN_ID,),
    options=(Option("--tail", "int", "only the last N lines", minimum=1),),
    examples=("logs k3xq7p", "logs k3xq7p --tail 50"),
)

PAGE_ID = Arg("page", "str", "a page id, as `{cmd} pages` lists them")

PAGES = Command(
    "pages",
    "open pages: stalls, failures, divergence, the cluster down",
    options=(
        Option("--all", "flag", "resolved pages too"),
        Option("--run", "run_id", "only this run's pages", metavar="RUN_ID"),
    ),
    examples=("pages", "pages --all", "pages --run k3xq7p"),
)

ACK = Command(
    "ack",
    "acknowledge a page: its escalation stops (anyone may: whoever is on call)",
    args=(PAGE_ID,),
    examples=("ack pq3x7k",),
)

RESOLVE = Command(
    "resolve",
    "resolve a page by hand; --cause writes down what was wrong (an eval case can be made from it)",
    args=(PAGE_ID,),
    options=(Option("--cause", "str", "what was wrong, in a sentence (quote it)", metavar="TEXT"),),
    examples=("resolve pq3x7k", "resolve pq3x7k --cause 'the data loader deadlocked on a full shm queue'"),
)

ASK = Command(
    "ask",
    "ask labbot's agents about your runs, code and pages; the answer comes in a thread",
    args=(Arg("question", "text", "your question, in plain words"),),
    examples=("ask why is run k3xq7p slow?", "ask which runs failed today and why?"),
)

ARTIFACTS = Command(
    "artifacts",
    "your agents' artifacts (reports, plots, payloads); with an id, post that one here as a file",
    args=(Arg("artifact", "str", "an artifact id, as `{cmd} artifacts` lists them", required=False),),
    examples=("artifacts", "artifacts a7k2m9pq"),
)

REPORT = Command(
    "report",
    "write the run's report to Notion (once its owner or an admin approves) and post the link in its thread",
    args=(RUN_ID,),
    examples=("report k3xq7p",),
)

EVAL_RUN_ID = Arg("run_id", "run_id", "an eval run's id, as `{cmd} eval list` lists them")

EVAL_GENERATE = Command(
    "eval-generate",
    "generate an eval suite from labbot's codebase: features deleted, their tests the reward (a job on Ray)",
    options=(
        Option("--count", "int", "how many tasks", default=10, minimum=1),
        Option("--seed", "int", "which functions are chosen", default=0, minimum=0),
        Option("--deletion", "str", "body (bodies removed), function (whole functions: harder) or mixed", metavar="D"),
        Option("--deletions", "int", "features of one file each task deletes (harder with more)", minimum=1),
        Option("--prefer", "str", "any, or deep: the largest function bodies first (harder)", metavar="P"),
    ),
    extra_hint=(
        "from Slack a suite is cut from the repository labbot serves (LABBOT_CODEBASE_ROOT); for another one, run "
        "`labbot eval generate PATH` where labbot runs"
    ),
    examples=(
        "eval generate",
        "eval generate --count 20 --deletion function",
        "eval generate --deletion function --deletions 2 --prefer deep",
    ),
)

EVAL_RUN = Command(
    "eval-run",
    "run a suite with a solver, sealed; the results table and .eval log come in its thread",
    args=(Arg("suite", "str", "a suite id, as `{cmd} eval list` lists them"),),
    options=(
        Option(
            "--solver", "str", "gold, none, agent, agent:PROVIDER/MODEL or cmd:COMMAND", default="gold", metavar="S"
        ),
        Option("--max-samples", "int", "samples run at once (default: the job's)", minimum=1),
        Option(
            "--solver-dir",
            "str",
            "an installed agent's folder, a name of [eval] solver_dirs, at /solver",
            metavar="NAME",
        ),
        Option(
            "--allow-host", "str", "hosts the command may reach, comma-separated ([eval] solver_hosts)", metavar="HOSTS"
        ),
        Option("--judge", "str", "an incident suite's judge model, PROVIDER/MODEL (default: configured)", metavar="M"),
    ),
    examples=("eval run suite-3f9a0c1d2e4b --solver agent", "eval run suite-3f9a0c1d2e4b --solver gold"),
)

EVAL_LIST = Command("eval-list", "eval suites and eval runs, newest first", examples=("eval list",))

EVAL_SHOW = Command(
    "eval-show",
    "an eval run's results: pass rate with its 95% interval, each task, the isolation score",
    args=(EVAL_RUN_ID,),
    examples=("eval show k3xq7p",),
)

EVAL_COMPARE = Command(
    "eval-compare",
    "two eval runs of one suite, paired by task: the difference with its 95% interval",
    args=(
        Arg("run_a", "run_id", "the first eval run"),
        Arg("run_b", "run_id", "the second eval run, on the same suite and tasks"),
    ),
    examples=("eval compare k3xq7p m2np4r",),
)

EVAL_SHARE = Command(
    "eval-share",
    "share a suite you generated with the whole lab (until then only you, and admins, can see and run it)",
    args=(Arg("suite", "str", "a suite id, as `{cmd} eval list` lists them"),),
    examples=("eval share suite-3f9a0c1d2e4b",),
)

EVAL_FROM_INCIDENT = Command(
    "eval-from-incident",
    "a resolved page whose cause was recorded, as an eval case: can a model reach the same diagnosis?",
    args=(PAGE_ID,),
    examples=("eval from-incident pq3x7k",),
)

EVAL_FROM_FEEDBACK = Command(
    "eval-from-feedback",
    "a 👎 with a comment on an agent's answer, as an eval case: can a model answer without that mistake?",
    args=(Arg("feedback", "str", "a feedback id, as `{cmd} feedback` lists them"),),
    examples=("eval from-feedback fbk3xq7p",),
)

FEEDBACK = Command(
    "feedback",
    "votes on agents' answers, run cards and eval results (👍/👎), newest first",
    options=(
        Option("--down", "flag", "only 👎"),
        Option("--mine", "flag", "only your votes"),
        Option("--limit", "int", "at most this many", default=20, minimum=1),
    ),
    examples=("feedback", "feedback --down"),
)

AB = Command(
    "ab",
    "the A/B test of the agents' models: each arm's 👍 rate with its 95% interval, and whether it differs yet",
    examples=("ab",),
)

COMPARE = Command(
    "compare",
    "two runs told apart only when the data can: training runs on a metric over their final windows (a bootstrap "
    "interval on the difference, an overlay plot in the thread), eval runs paired by task",
    args=(
        Arg("run_a", "run_id", "the first run"),
        Arg("run_b", "run_id", "the second run: two training runs, or two eval runs of one suite"),
    ),
    options=(
        Option("--metric", "str", "training runs: the metric (default: their headline, e.g. loss)", metavar="M"),
        Option(
            "--better", "str", "training runs: lower or higher, the way M is better (default: by name)", metavar="W"
        ),
        Option("--window", "int", "training runs: the last N points of each (default: 10 %, at least 20)", minimum=1),
    ),
    examples=("compare k3xq7p m2np4r", "compare k3xq7p m2np4r --metric reward", "compare k3xq7p m2np4r --window 200"),
)

SWEEP = Command(
    "sweep",
    "an experiment: a job over a search space, each config run once per seed, searched and pruned by Optuna within "
    "a budget; its card, trials and answer (ranking, intervals, verdict, plots) come in its thread",
    args=(Arg("job", "job", "the job to sweep, e.g. tiny-lm"),),
    options=(
        Option("--metric", "str", "the objective: a metric the job reports, e.g. loss", metavar="M"),
        Option("--goal", "str", "min or max (default: by the metric's name)", metavar="G"),
        Option("--trials", "int", "configs to try (default: the grid's size, else 20)", minimum=1),
        Option("--concurrency", "int", "trials running at once (default 2)", minimum=1),
        Option("--seeds", "int", "runs of each config, one per seed (default 1)", minimum=1),
        Option("--search", "str", "grid, random, tpe (default) or cmaes", metavar="S"),
        Option("--prune", "str", "asha, hyperband, median or none (default)", metavar="P"),
        Option("--budget", "str", "GPU- or CPU-hours, e.g. 2gpu-h or 10cpu-h", metavar="B"),
        Option("--at", "str", "read the metric at a step, or final (default)", metavar="STEP"),
        Option("--name", "str", "a name for the experiment", metavar="N"),
        Option("--purpose", "str", f"what its runs are for: {'|'.join(PURPOSES)} (default: the job's)", metavar="P"),
        Option("--search-seed", "int", "the sampler's seed, for a search that can be repeated (default: drawn)"),
        Option("--plan", "flag", "show what it would run and cost, and start nothing"),
    ),
    accepts_params=True,
    examples=(
        "sweep tiny-lm lr=loguniform(1e-4,1e-2) n_embd=32,64,128 --metric loss --trials 12 --prune asha",
        "sweep tiny-lm lr=1e-3,3e-3,1e-2 --search grid --seeds 3 --metric loss --budget 2cpu-h",
        "sweep tiny-lm lr=loguniform(1e-4,1e-2) --metric loss --plan",
    ),
)

EXPERIMENT = Command(
    "experiment",
    "one experiment: its trials, ranking and verdict; or pause, resume or stop it, or stop one trial (its owner)",
    args=(
        Arg("experiment", "run_id", "an experiment id, as `{cmd} experiments` lists them"),
        Arg("action", "str", "pause, resume, stop or stop-trial", required=False),
        Arg("trial", "int", "stop-trial: the trial's number", required=False),
    ),
    examples=("experiment xk3q7pm", "experiment xk3q7pm pause", "experiment xk3q7pm stop-trial 4"),
)

EXPERIMENTS = Command("experiments", "experiments, newest first", examples=("experiments",))

RESEARCH = Command(
    "research",
    "a research question for the researcher agent: it plans experiments, you approve the plan once (its cost shown), "
    "it runs them and answers in a thread, every number checked against labbot's store",
    args=(Arg("question", "text", "the question, in plain words"),),
    examples=("research which learning rate minimises tiny-lm's loss at 300 steps within 2 cpu-hours?",),
)

PRIORITY = Command(
    "priority",
    "move a queued run in its purpose's line: higher goes first (admins; only a queued run's priority matters)",
    args=(RUN_ID, Arg("priority", "int", "a whole number from -1000 to 1000; 0 is a launch's")),
    permission=Permission.ADMIN,
    examples=("priority k3xq7p 10",),
)

CAPACITY = Command(
    "capacity",
    "each purpose's use of the cluster against its [compute] cap, who is using it, and what is queued",
    examples=("capacity",),
)

HELP = Command(
    "help",
    "these commands, or one command's options and examples",
    args=(Arg("command", "str", "a subcommand, e.g. launch", required=False),),
    aliases=("?",),
    examples=("help", "help launch"),
)

COMMANDS: tuple[Command, ...] = (
    LAUNCH,
    RUNS,
    STATUS,
    STOP,
    RESTART,
    LOGS,
    PAGES,
    ACK,
    RESOLVE,
    ASK,
    ARTIFACTS,
    REPORT,
    EVAL_GENERATE,
    EVAL_RUN,
    EVAL_LIST,
    EVAL_SHOW,
    EVAL_COMPARE,
    EVAL_SHARE,
    EVAL_FROM_INCIDENT,
    EVAL_FROM_FEEDBACK,
    FEEDBACK,
    AB,
    COMPARE,
    SWEEP,
    EXPERIMENTS,
    EXPERIMENT,
    RESEARCH,
    CAPACITY,
    PRIORITY,
    HELP,
)


def lab_registry() -> Registry:
    """A fresh registry of labbot's subcommands (tests and composition roots that add their own use this)."""
    return Registry(COMMANDS)


LAB = lab_registry()
