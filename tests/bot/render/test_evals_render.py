"""labbot.bot.render.evals: what an eval's results table shows of each sample."""

from __future__ import annotations

from labbot.bot.render.evals import last_said, results_text


def test_the_last_line_column_shows_what_the_solver_said_not_its_exit_status() -> None:
    assert last_said("patched calc.add\n[exit 0]") == "patched calc.add"
    assert last_said("a\nb\n[killed at the limit]\n") == "b"
    assert last_said("[exit 1]") == "[exit 1]", "nothing else said: the status is what there is"
    assert last_said("") == ""
    doc = {
        "id": "r1", "suite": "suite-1", "solver": "./fix.sh", "status": "succeeded", "pass_rate": 1.0,
        "samples": [{"task": "t1", "passed": True, "output": "restored add()\n[exit 0]", "time_s": 2.0}],
    }  # fmt: skip
    text = results_text(doc)
    assert "restored add()" in text and "[exit 0]" not in text


def test_a_finished_runs_pass_rate_is_not_so_far() -> None:
    from labbot.bot.render.evals import samples_progress

    metrics = {"samples_done": 4, "samples_total": 4, "pass_rate": 0.75}
    assert samples_progress({"run": {"status": "running", "metrics": metrics}}) == "4/4 samples, pass rate so far 75%"
    assert samples_progress({"run": {"status": "succeeded", "metrics": metrics}}) == "4/4 samples, pass rate 75%"


def test_eval_show_of_a_suite_lists_its_tasks() -> None:
    from labbot.bot.render.evals import suite_text

    suite = {
        "suite": "suite-3f2a9c0d1e4b", "source": "shapes", "commit": "0123456789abcdef",
        "tasks": [{"id": "t001-area", "path": "shapes/geometry.py", "symbol": "area",
                   "fail_to_pass": ["a", "b"], "pass_to_pass": ["c"]}],
    }  # fmt: skip
    text = suite_text(suite)
    assert text.startswith("suite-3f2a9c0d1e4b — shapes at 0123456789, 1 task")
    assert "t001-area" in text and "shapes/geometry.py" in text and "area" in text
