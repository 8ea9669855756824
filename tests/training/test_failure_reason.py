"""A failed attempt's reason is the exception's last line with its exit code, not Ray's envelope."""

from __future__ import annotations

from labbot.training import failure_reason
from labbot.training.failure_reason import exception_line, reason

ENVELOPE = "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n"
TRACEBACK = """step 40 loss 2.31
Traceback (most recent call last):
  File "/app/tiny_lm.py", line 12, in <module>
    main()
  File "/app/tiny_lm.py", line 9, in main
    raise ValueError("loss is nan at step 50")
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ValueError: loss is nan at step 50
"""


def test_the_exception_line_and_the_exit_code() -> None:
    got = reason("JOB_ENTRYPOINT_COMMAND_ERROR", ENVELOPE + TRACEBACK)
    assert got == "ValueError: loss is nan at step 50 (exit code 1)"


def test_the_last_traceback_wins_over_an_earlier_one() -> None:
    chained = (
        TRACEBACK
        + "\nDuring handling of the above exception, another exception occurred:\n\n"
        + TRACEBACK.replace("ValueError: loss is nan at step 50", "labbot.jobs.Diverged: gave up")
    )
    assert reason("JOB_ENTRYPOINT_COMMAND_ERROR", ENVELOPE + chained) == "labbot.jobs.Diverged: gave up (exit code 1)"


def test_a_bare_exception_name() -> None:
    logs = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nKeyboardInterrupt\n'
    assert exception_line(logs) == "KeyboardInterrupt"


def test_no_traceback_the_last_log_line() -> None:
    got = reason("JOB_ENTRYPOINT_COMMAND_ERROR", ENVELOPE + "starting\nerror: dataset /data/x not found\n")
    assert got == "error: dataset /data/x not found (exit code 1)"


def test_no_logs_the_exit_code() -> None:
    assert reason(
        "JOB_ENTRYPOINT_COMMAND_ERROR", "Job entrypoint command failed with exit code 2. No logs available."
    ) == ("exit code 2")


def test_a_signal_is_named() -> None:
    got = reason(
        "JOB_ENTRYPOINT_COMMAND_ERROR",
        "Job entrypoint command failed with exit code -9, last available logs (truncated to 20,000 chars):\nstep 3\n",
    )
    assert got == "killed by SIGKILL; the log's last line: step 3"


def test_another_error_type_keeps_its_name() -> None:
    assert reason("RUNTIME_ENV_SETUP_FAILED", "pip install failed\nNo matching distribution for nope==9") == (
        "RUNTIME_ENV_SETUP_FAILED: No matching distribution for nope==9"
    )
    assert reason(None, None) == "no reason given"
    assert reason("JOB_SUPERVISOR_ACTOR_DIED", "") == "JOB_SUPERVISOR_ACTOR_DIED"


def test_one_short_line() -> None:
    got = reason("X", "Traceback (most recent call last):\nValueError: " + "y" * 1000 + "\nmore")
    assert "\n" not in got and len(got) <= 300


# ---- a lost node -------------------------------------------------------------------------------------------------

# what Ray 2.60 said when a job's node was killed under it on a real multi-node cluster (tests/e2e/test_multinode.py)
NODE_DIED = (
    "Job supervisor actor died: The actor died unexpectedly before finishing this task.\n\tclass_name: JobSupervisor\n"
    "\tactor_id: c4070549c0601d4a49848d1801000000\n\tpid: 8841\n\tname: _ray_internal_job_actor_raysubmit_2sn6v\n"
    "\tnamespace: SUPERVISOR_ACTOR_RAY_NAMESPACE\n\tip: 192.0.2.2\nThe actor died because its node has died. Node Id: "
    "a95ab0918b0d2f86f98abac4dbc2813e0f686757f02aed9c8b3a7e35\n\tthe actor's node was terminated unexpectedly: "
    "health check failed due to missing too many heartbeats"
)


def test_a_supervisor_that_died_with_its_node_is_a_lost_node() -> None:
    lost = failure_reason.lost_node("JOB_SUPERVISOR_ACTOR_DIED", NODE_DIED)
    assert lost == failure_reason.LostNode(
        "a95ab0918b0d2f86f98abac4dbc2813e0f686757f02aed9c8b3a7e35",
        "192.0.2.2",
        "health check failed due to missing too many heartbeats",
    )
    assert lost.words() == "192.0.2.2 (node a95ab091)"
    assert failure_reason.reason("JOB_SUPERVISOR_ACTOR_DIED", NODE_DIED) == (
        "lost its node 192.0.2.2 (node a95ab091): health check failed due to missing too many heartbeats"
    )


def test_other_failures_are_not_a_lost_node() -> None:
    assert failure_reason.lost_node("JOB_ENTRYPOINT_COMMAND_ERROR", NODE_DIED) is None  # the job's own exit
    died_alone = NODE_DIED.split("\nThe actor died because")[0]  # a supervisor that died on a live node
    assert failure_reason.lost_node("JOB_SUPERVISOR_ACTOR_DIED", died_alone) is None
    assert failure_reason.lost_node(None, "ValueError: loss is nan") is None
    assert failure_reason.lost_node("JOB_SUPERVISOR_ACTOR_DIED", None) is None
    no_ip = NODE_DIED.replace("\tip: 192.0.2.2\n", "")
    lost = failure_reason.lost_node("JOB_SUPERVISOR_ACTOR_DIED", no_ip)
    assert lost is not None and lost.words() == "node a95ab091"
