"""The A/B report of two agent models (pure): each arm's 👍 rate with its 95 % Wilson interval, the difference (B − A)
with Newcombe's square-and-add interval, and a plain verdict.

The verdict is never "significant" on too few votes: below ``MIN_VOTES`` on either arm it says "not enough votes",
whatever the interval, because with a handful of votes Wilson's intervals are honest but the normal approximation
behind Newcombe's can be off, and a lab would act on a result that a few more votes overturn. Past that it says B
or A is preferred only when the interval excludes zero. "How many more votes" is the textbook sample size for two
proportions (two-sided 5 %, 80 % power) at the difference seen so far, minus the votes each arm has; when the arms
agree to within ``SMALLEST_DIFFERENCE`` it says how many votes per arm a difference that small would take instead.
Votes on one arm's answers are independent of the other's (different threads), so the unpaired form is the right
one. The statistics are :mod:`labbot.common.proportions`, the same as an eval's pass rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from labbot.agents.feedback.ab import AbTest
from labbot.agents.feedback.store import FeedbackStore
from labbot.common.proportions import Z95, unpaired_interval, wilson

__all__ = ["MIN_VOTES", "ab_document", "ab_report", "votes_needed"]

MIN_VOTES = 10  # per arm, before any verdict but "not enough votes"
SMALLEST_DIFFERENCE = 0.05
Z80 = 0.8416212335729143  # the standard normal's 80th percentile: 80 % power


def votes_needed(p_a: float, p_b: float) -> int:
    """Votes per arm for a two-sided 5 % test of two proportions to find ``p_b − p_a`` with 80 % power."""
    d = abs(p_b - p_a)
    if d == 0:
        raise ValueError("no difference: any sample size is too small")
    p_bar = (p_a + p_b) / 2
    root = Z95 * math.sqrt(2 * p_bar * (1 - p_bar)) + Z80 * math.sqrt(p_a * (1 - p_a) + p_b * (1 - p_b))
    return max(1, math.ceil(root * root / (d * d)))


def _arm(numbers: Mapping[str, Any]) -> dict[str, Any]:
    up, down = int(numbers.get("up", 0)), int(numbers.get("down", 0))
    n = up + down
    return {
        "arm": numbers["arm"],
        "model": numbers["model"],
        "answers": int(numbers.get("answers", 0)),
        "votes": n,
        "up": up,
        "down": down,
        "up_rate": round(up / n, 4) if n else None,
        "interval": wilson(up, n).to_json(),
        "model_calls_per_answer": round(float(numbers.get("model_calls_per_answer", 0.0)), 2),
        "tokens_per_answer": round(float(numbers.get("tokens_per_answer", 0.0)), 1),
        "seconds_per_answer": round(float(numbers.get("seconds_per_answer", 0.0)), 2),
    }


def ab_report(arms: Sequence[Mapping[str, Any]], *, min_votes: int = MIN_VOTES) -> dict[str, Any]:
    """The report for arms A and B (``FeedbackStore.arm_numbers``' rows); see the module docstring."""
    if len(arms) != 2:
        raise ValueError(f"an A/B report needs two arms, got {len(arms)}")
    a, b = (_arm(x) for x in arms)
    out: dict[str, Any] = {"arms": [a, b], "min_votes": min_votes}
    na, nb = a["votes"], b["votes"]
    if na and nb:
        diff = b["up"] / nb - a["up"] / na
        # unpaired_interval is first − second: B − A is the interval of (B, A)
        ci = unpaired_interval(b["up"], nb, a["up"], na)
        out["difference"] = round(diff, 4)
        out["interval"] = ci.to_json()
    else:
        diff, ci = 0.0, None
        out["difference"] = None
        out["interval"] = None
    short = [x["arm"] for x in (a, b) if x["votes"] < min_votes]
    if short:
        out["significant"] = False
        out["verdict"] = "not enough votes"
        out["why"] = (
            " and ".join(f"arm {x['arm']} has {x['votes']} vote(s)" for x in (a, b) if x["arm"] in short)
            + f"; a verdict needs at least {min_votes} on each"
        )
    elif ci is not None and ci.excludes_zero():
        better = b if diff > 0 else a
        out["significant"] = True
        out["verdict"] = f"{better['arm']} is preferred"
        out["why"] = (
            f"{better['model']}'s answers get more 👍: the 95% interval of B − A, "
            f"[{ci.low:+.1%}, {ci.high:+.1%}], excludes zero"
        )
    else:
        out["significant"] = False
        out["verdict"] = "no difference shown yet"
        assert ci is not None
        out["why"] = f"the 95% interval of B − A, [{ci.low:+.1%}, {ci.high:+.1%}], includes zero"
    out["more_votes_needed"] = _more_needed(a, b, significant=bool(out["significant"]), min_votes=min_votes)
    return out


def _more_needed(a: Mapping[str, Any], b: Mapping[str, Any], *, significant: bool, min_votes: int) -> dict[str, Any]:
    """Roughly how many more votes per arm (see the module docstring)."""
    if significant:
        return {"per_arm": 0, "note": "the difference is significant at these numbers"}
    na, nb = a["votes"], b["votes"]
    if not na or not nb:
        return {
            "per_arm": max(min_votes - min(na, nb), 0),
            "note": f"at least {min_votes} votes on each arm before anything can be said",
        }
    pa, pb = a["up"] / na, b["up"] / nb
    if abs(pb - pa) < SMALLEST_DIFFERENCE:
        lo = min(max(pa, pb), 1 - SMALLEST_DIFFERENCE)
        need = votes_needed(lo, lo + SMALLEST_DIFFERENCE)
        return {
            "per_arm": max(need - min(na, nb), min_votes - min(na, nb), 0),
            "note": f"the arms agree so far; telling apart a {SMALLEST_DIFFERENCE:.0%} difference takes about "
            f"{need} votes per arm",
        }
    need = votes_needed(pa, pb)
    return {
        "per_arm": max(need - min(na, nb), min_votes - min(na, nb), 0),
        "note": f"about {need} votes per arm would show a difference of {pb - pa:+.0%} (80% power)",
    }


def ab_document(store: FeedbackStore, ab: AbTest | None) -> dict[str, Any]:
    """The A/B report, or what to set when there is no test."""
    if ab is None:
        return {
            "configured": False,
            "message": 'no A/B test is running: set [agents.ab] models = ["MODEL_A", "MODEL_B"] in labbot.toml and '
            "restart labbot; new agent threads are then split between the two",
        }
    report = ab_report(store.arm_numbers(ab.models))
    return {"configured": True, "models": list(ab.models), "split": ab.split, "roles": list(ab.roles), **report}
