"""Judge agreement: on incident cases with a known right and a known wrong diagnosis, how often the judge model grades
each correctly — the judge labbot uses for incident evals (``labbot.evals.incidents.cases``: its system prompt, its
prompt, and the strict reading of its answer, where anything but the verdict is "unjudged").

Each case below is a cause as an engineer would record it, a right diagnosis worded differently (sometimes more
specific), and a wrong one that is plausible for the same page (another cause, or the symptom restated). The judge
sees every pair; agreement is the share graded as expected, with unjudged answers counted apart (they are never a
pass, so a judge that fails to answer lowers agreement). Needs the judge's provider: ``--judge PROVIDER/MODEL``
and its key in the environment (``ANTHROPIC_API_KEY`` for ``anthropic/...``).

    .venv/bin/python benchmarks/judge_agreement.py --judge anthropic/claude-sonnet-4-5 [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from labbot.evals.incidents.cases import JUDGE_SYSTEM, judge_prompt, parse_verdict
from labbot.evals.incidents.runner import JUDGE_TIMEOUT_S

# (recorded cause, a right diagnosis, a wrong diagnosis)
CASES = [
    (
        "The data loader deadlocked: its worker processes blocked on a full shared-memory queue (/dev/shm was 64 MB).",
        "DataLoader workers hung writing to shared memory because /dev/shm is too small in the container.",
        "The GPU driver crashed, so the training step never returned.",
    ),
    (
        "Learning rate 3e-2 was 10x too high after warm-up ended; the loss diverged to NaN at step 1,200.",
        "The LR was set far too high; once warm-up finished the updates blew up and produced NaNs.",
        "A corrupted batch in the dataset contained inf values that produced NaN loss.",
    ),
    (
        "CUDA out of memory: the sequence length was raised to 4096 without lowering the micro-batch size.",
        "OOM on the GPU after the context length change; the batch no longer fit in memory.",
        "The job was preempted by a higher-priority job on the node.",
    ),
    (
        "The spot node was preempted; the job lost its worker and telemetry stopped.",
        "The cloud reclaimed the spot instance the run was on.",
        "The training process hung in an NCCL all-reduce.",
    ),
    (
        "NCCL all-reduce hung because one rank's NIC was down (ib0 link flapping on node 7).",
        "A network interface problem on one node made the collective communication hang.",
        "The learning rate schedule decayed to zero, so progress stopped.",
    ),
    (
        "The reward function returned 0 for every sample after a regex change broke answer parsing.",
        "A bug in reward parsing: the changed regex never matched, so all rewards were zero.",
        "The policy's entropy collapsed, so every sample in a group was the same.",
    ),
    (
        "Entropy collapsed because the KL coefficient was set to 0 and the policy overfit to one answer format.",
        "With no KL penalty the policy collapsed onto a single output pattern.",
        "The reward model server was down, so rewards were missing.",
    ),
    (
        "The checkpoint directory's disk filled up; saving failed and the job crashed at step 5,000.",
        "The run died when it could not write a checkpoint because the volume was out of space.",
        "The learning rate was too high and the loss exploded.",
    ),
    (
        "Throughput halved because the data loader was running with num_workers=0 after a config merge.",
        "Data loading became the bottleneck: the merged config dropped the loader workers to zero.",
        "The GPU was thermally throttling.",
    ),
    (
        "The tokenizer was swapped for one with another vocabulary; the checkpoint's embeddings mismatched it.",
        "A tokenizer/vocabulary mismatch with the checkpoint's embedding table.",
        "Slow data loading: the loss is fine but the run is slow.",
    ),
    (
        "Mixed precision fp16 overflowed in attention logits; switching to bf16 fixed it.",
        "fp16 overflow in the attention scores produced infs that became NaN.",
        "The optimizer state was not restored when the job resumed from its checkpoint.",
    ),
    (
        "The Ray head was restarted by an OS update; jobs were orphaned and telemetry stopped.",
        "The cluster's head node went down (an OS update restarted it), taking the job supervision with it.",
        "The model diverged because of a bad learning rate.",
    ),
]


async def judge_once(model: object, cause: str, diagnosis: str) -> str:
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, Model

    assert isinstance(model, Model)
    try:
        out = await model.generate(
            [ChatMessageSystem(content=JUDGE_SYSTEM), ChatMessageUser(content=judge_prompt(cause, diagnosis))],
            # as the incident job asks its judge, and never retrying for ever: an unreachable judge is a figure too
            config=GenerateConfig(temperature=0.0, max_tokens=300, timeout=JUDGE_TIMEOUT_S, max_retries=2),
        )
        return parse_verdict(None if out.error else out.completion).verdict
    except Exception:
        return "unjudged"


async def run(judge: str, rounds: int) -> dict[str, object]:
    from inspect_ai.model import get_model

    model = get_model(judge)
    agreements, unjudged = [], 0
    for _ in range(rounds):
        right = 0
        for cause, good, bad in CASES:
            v_good, v_bad = await judge_once(model, cause, good), await judge_once(model, cause, bad)
            right += (v_good == "correct") + (v_bad == "incorrect")
            unjudged += (v_good == "unjudged") + (v_bad == "unjudged")
        agreements.append(right / (2 * len(CASES)))
    return {"agreement": statistics.median(agreements), "rounds": agreements, "unjudged": unjudged}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--judge", required=True, help="the judge model, PROVIDER/MODEL (its key in the environment)")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    try:
        result = asyncio.run(run(a.judge, a.rounds))
    except Exception as e:  # the provider's client cannot start: no key, no package
        print(f"the judge {a.judge} cannot be asked from here: {str(e).strip().splitlines()[-1][:300]}")
        print(json.dumps({"benchmark": "judge_agreement", "judge": a.judge, "ok": False, "error": "no judge"}))
        return 1
    pairs = 2 * len(CASES)
    if result["unjudged"] == pairs * a.rounds:
        print(f"the judge {a.judge} answered nothing usable ({pairs * a.rounds} unjudged): is its key set and the "
              "provider reachable from here?")  # fmt: skip
        print(json.dumps({"benchmark": "judge_agreement", "judge": a.judge, "ok": False, "error": "no judge"}))
        return 1
    print(f"judge {a.judge}: agreement {result['agreement']:.0%} (median over {a.rounds} rounds of {pairs} graded "
          f"diagnoses: {result['rounds']}), {result['unjudged']} unjudged")  # fmt: skip
    ok = float(result["agreement"]) >= 0.9  # type: ignore[arg-type]
    print(json.dumps({"benchmark": "judge_agreement", "judge": a.judge, **result, "claim": "agreement >= 90 %",
                      "ok": ok}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
