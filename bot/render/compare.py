"""Two runs compared, in words: two training runs on a metric over their final windows as a short table with the
interval and the verdict, two eval runs as ``labbot.bot.render.evals`` says them. A pure function of
``/api/v1/compare``'s JSON, shown by ``labbot compare`` and ``/lab compare`` alike."""

from __future__ import annotations

from typing import Any

from labbot.bot.render.evals import comparison_text as eval_comparison_text


def comparison_text(doc: dict[str, Any]) -> str:
    """A comparison in words: the eval one as ``labbot eval compare`` says it; a training one as a short table."""
    if doc.get("kind") == "eval":
        return eval_comparison_text(doc)
    a, b, metric = doc["a"], doc["b"], doc["metric"]
    rows = [["", "run", "name", "window (steps)", "points", f"mean {metric}"]]
    for label, side in (("A", a), ("B", b)):
        left_out = f" (+{side['left_out']} NaN/inf)" if side["left_out"] else ""
        rows.append(
            [
                label,
                str(side["id"]),
                str(side["name"]),
                f"{side['steps'][0]}–{side['steps'][1]}",
                f"{side['points']}{left_out}",
                _num(side["mean"]),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    low, high = doc["interval"]
    pct = f"{doc['confidence']:.0%}"
    lines += [
        f"A − B = {_num(doc['difference'], signed=True)}, {pct} CI {_num(low, signed=True)} to "
        f"{_num(high, signed=True)}",
        f"{metric}: {doc['rule']}",
        f"method: {doc['method']}",
        *[f"note: {n}" for n in doc.get("notes") or []],
    ]
    if doc["winner"] is None and doc["verdict"].startswith("no difference"):
        lines.append(f"verdict: {doc['verdict']} — the interval includes zero; these runs are not told apart")
    else:
        lines.append(f"verdict: {doc['verdict']} (the interval excludes zero)")
    return "\n".join(lines)


def _num(value: Any, *, signed: bool = False) -> str:
    if not isinstance(value, int | float):
        return str(value)
    return f"{value:+.4g}" if signed else f"{value:.4g}"
