"""The seal, measured: each probe's verdict with its evidence, and the run's isolation score.

A probe tries one way a solver could read the answer or fake the reward (git history, build leftovers, the network,
labbot's own files, tampering with the tests) from inside a real sandbox of the run; ``passed`` means the way is
closed. A run whose seal failed says so at the top of its results and its pass rate is marked untrusted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Category = Literal["history", "leftovers", "network", "host", "tampering"]
MAX_EVIDENCE = 2000
BEFORE = "before the samples"
ALONGSIDE = "alongside the samples"
CACHED = "cached"  # "cached <ISO time of the run that saw it pass>"


@dataclass(frozen=True)
class ProbeResult:
    name: str  # e.g. "git log --all", "raw TCP to 1.1.1.1:80"
    category: Category
    passed: bool  # True: the way is closed
    evidence: str  # what the probe saw (cut to MAX_EVIDENCE characters): the command's output, the file it found
    # when it ran, in the run's report: "before the samples", "alongside the samples" or "cached <ISO time>" (a
    # passing verdict reused from that time: see evals.seal.cache); "" until the runner says
    ran: str = ""

    def __post_init__(self) -> None:
        if len(self.evidence) > MAX_EVIDENCE:
            object.__setattr__(self, "evidence", self.evidence[:MAX_EVIDENCE] + "…")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class IsolationReport:
    probes: list[ProbeResult] = field(default_factory=list)

    @property
    def score(self) -> float:
        """Probes passed / total (1.0 with no probes is never reported: a run always has its battery)."""
        return sum(p.passed for p in self.probes) / len(self.probes) if self.probes else 0.0

    @property
    def sealed(self) -> bool:
        return bool(self.probes) and all(p.passed for p in self.probes)

    def failed(self) -> list[ProbeResult]:
        return [p for p in self.probes if not p.passed]

    def headline(self) -> str:
        """One line for the top of a run's results and its Slack thread."""
        total = len(self.probes)
        passed = sum(p.passed for p in self.probes)
        if self.sealed:
            return f"sealed: {passed}/{total} isolation probes passed"
        names = ", ".join(p.name for p in self.failed()[:5])
        return f"SEAL FAILED ({passed}/{total} probes passed; open: {names}): scores from this run are untrusted"

    def to_json(self) -> dict[str, Any]:
        return {"score": round(self.score, 4), "sealed": self.sealed, "probes": [p.to_json() for p in self.probes]}

    @staticmethod
    def from_json(doc: dict[str, Any]) -> IsolationReport:
        """Results written before ``ran`` existed load too: those runs had their battery before the samples."""
        return IsolationReport([ProbeResult(**{"ran": BEFORE, **p}) for p in doc.get("probes", [])])
