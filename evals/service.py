"""The control plane's side of evals: suites kept (artifact store + an unpacked copy the jobs read), eval runs
launched as labbot runs, and their results read back.

- A suite arrives as a ``.tar.gz`` of its folder (``labbot eval generate`` makes it on the machine with the
  checkout). It is checked (a ``suite.json`` whose id matches its content, task ids of their format, no member
  outside the folder, no links, no devices: tar's ``data`` filter), stored in the artifact store under the
  ``evals`` owner as ``SUITE_ID.tar.gz`` (a suite's id is the hash of its content, so a name is a version), and
  unpacked under ``SUITES_ROOT/SUITE_ID/`` for the eval jobs.
- An eval run is a run of the built-in ``eval`` job (``labbot runs`` lists it, it has a thread, telemetry and the
  watchdog's rules); its job writes ``results.json`` and the inspect ``.eval`` log into the run's folder
  (``RUN_ROOT/RUN_ID/eval/``). The first read of a finished run copies the ``.eval`` log into the artifact store
  (``evals`` / ``RUN_ID.eval``), once.
- Who sees an eval run's results (``results``, ``eval_runs``, ``compare``, given a ``viewer``): whoever may run its
  suite (:meth:`EvalService.visible`: its owners, admins, everyone once it is shared). Another's is refused exactly
  like an unknown id, naming the eval runs the viewer can see. Incident suites (pages' and 👎 feedback's cases) are
  the lab's, so their runs are everyone's. No ``viewer`` is the admin-token holder (the CLI): every run.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from labbot.common.errors import BadRequest, LabbotError, UnknownRun
from labbot.common.humanize import format_bytes
from labbot.common.redact import Redactor
from labbot.evals.incidents.cases import CASE_ID, INCIDENT_SUITE_ID, suite_of
from labbot.evals.incidents.feedback_cases import freeze_feedback
from labbot.evals.incidents.page_cases import freeze
from labbot.evals.running.model_keys import agent_ready
from labbot.evals.running.solver_access import SolverAccess, check_secret_env, drop_secrets, write_secrets
from labbot.evals.stats import compare, saturated, task_set_difference, wilson
from labbot.evals.suite import SUITE_FILE, SUITE_ID, TASK_ID, TOOLCHAIN_IMPORTS, Suite, suite_id
from labbot.storage.artifacts import ArtifactStore
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest

EVALS_OWNER = "evals"
EVAL_JOB = "eval"
EVAL_GENERATE_JOB = "eval-generate"
EVAL_INCIDENTS_JOB = "eval-incidents"
EVAL_JOBS = frozenset({EVAL_JOB, EVAL_INCIDENTS_JOB})
CASES_DIR = "incident-cases"  # under the suites root: one CASE_ID.json per incident case
# under the suites root: SUITE_ID.json {"owners": [...], "shared": bool}, and SUITE_ID.run (the eval-generate run that
# wrote the suite: its owner owns it)
OWNERS_DIR = ".owners"
# a researcher, as Slack names people: a suite such a person generates is theirs until shared (one the CLI, the API or
# an agent made is the lab's: those act for the lab, and have no Slack identity to match a researcher's)
RESEARCHER = re.compile(r"[UW][A-Z0-9]{2,}")
RESULTS = "results.json"
CASES_FILE = "cases.json"
MAX_SUITE_BYTES = 500 << 20  # unpacked
REFERENCE_SOLVERS = frozenset({"gold", "none"})  # they check a suite; they say nothing of its difficulty


class UnknownSuite(LabbotError):
    status = 404
    code = "unknown_suite"


class NotAnEvalRun(LabbotError):
    status = 404
    code = "not_an_eval_run"


def check_suite_id(value: str) -> str:
    if not (SUITE_ID.fullmatch(value) or INCIDENT_SUITE_ID.fullmatch(value)):
        raise BadRequest(
            f"{value[:60]!r} is not a suite id: suite- (or incidents-) and 12 hex digits, as `eval list` shows"
        )
    return value


def eval_dir(run_root: Path, run_id: str) -> Path:
    """Where an eval run's job writes its results and log (beside the run's checkpoints folder)."""
    return run_root / run_id / "eval"


class EvalService:
    def __init__(
        self,
        runs: RunService,
        artifacts: ArtifactStore | None,
        suites_root: Path,
        *,
        redactor: Redactor | None = None,
        access: SolverAccess | None = None,
    ) -> None:
        self.runs = runs
        # what a run may give its command solver: [eval] solver_dirs and solver_hosts
        self.access = access or SolverAccess()
        self.artifacts = artifacts
        self.suites_root = suites_root
        # what a frozen incident case is redacted with: the credential shapes and labbot's own secrets
        self.redactor = redactor or Redactor()
        self._lock = threading.Lock()

    # -- suites ------------------------------------------------------------------------------------------------

    def add_suite(self, archive: IO[bytes], *, owner: str | None = None) -> dict[str, Any]:
        """Check and keep a suite sent as a .tar.gz of its folder; the same suite again is a no-op, except that
        ``owner`` (who sent it) becomes one of its owners. A suite is its owners' until one of them shares it."""
        self.suites_root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.TemporaryDirectory(dir=self.suites_root, prefix=".incoming-") as tmp:
            folder = Path(tmp) / "suite"
            _unpack(archive, folder)
            suite = _checked(folder)
            dest = self.suites_root / suite.id
            with self._lock:
                if not dest.exists():
                    folder.rename(dest)
                if owner:
                    meta = self._meta(suite.id)
                    if owner not in meta["owners"]:
                        shared = meta["shared"] if meta["owners"] else False
                        self._write_meta(suite.id, [*meta["owners"], owner], shared)
                if self.artifacts is not None:
                    archive.seek(0)
                    self._store(f"{suite.id}.tar.gz", archive, "application/gzip")
        return {**summary(suite), **self._meta(suite.id)}

    def _meta(self, suite_id_: str) -> dict[str, Any]:
        """Who owns a suite and whether it is shared. A suite an eval-generate run of a researcher wrote is theirs;
        incident suites, suites the CLI or an agent made, and suites kept before suites had owners are the lab's."""
        folder = self.suites_root / OWNERS_DIR
        path = folder / f"{suite_id_}.json"
        if path.is_file():
            doc = json.loads(path.read_text())
            return {"owners": [str(o) for o in doc.get("owners") or []], "shared": bool(doc.get("shared"))}
        made_by = folder / f"{suite_id_}.run"
        if made_by.is_file():
            try:
                owner = str(self.runs.get(made_by.read_text().strip())["owner"])
            except LabbotError:
                owner = ""  # the run is gone: the suite stays the lab's
            if RESEARCHER.fullmatch(owner):
                return {"owners": [owner], "shared": False}
        return {"owners": [], "shared": True}

    def _write_meta(self, suite_id_: str, owners: list[str], shared: bool) -> None:
        folder = self.suites_root / OWNERS_DIR
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_atomic(folder / f"{suite_id_}.json", json.dumps({"owners": owners, "shared": shared}))

    def visible(self, suite_id_: str, viewer: str | None, *, admin: bool = False) -> bool:
        """Whether ``viewer`` may see and run a suite: shared, one of its owners, or an admin (None: no check)."""
        if viewer is None or admin:
            return True
        meta = self._meta(suite_id_)
        return bool(meta["shared"] or viewer in meta["owners"])

    def share(self, suite_id_: str, *, by: str, admin: bool = False) -> dict[str, Any]:
        """Share a suite with the whole lab: one of its owners or an admin may."""
        self.suite(suite_id_, viewer=by, admin=admin)  # refused, naming what they may run, unless they may see it
        meta = self._meta(suite_id_)
        if not meta["shared"]:  # visible and not shared: an owner or an admin asks
            with self._lock:
                self._write_meta(suite_id_, meta["owners"], True)
        return {"suite": suite_id_, **self._meta(suite_id_)}

    def suites(self, viewer: str | None = None, *, admin: bool = False) -> list[dict[str, Any]]:
        """The suites ``viewer`` may see (every one when None), each with its ``owners`` and ``shared``."""
        if not self.suites_root.is_dir():
            return []
        out = []
        for folder in sorted(self.suites_root.iterdir()):
            kept = SUITE_ID.fullmatch(folder.name) and (folder / SUITE_FILE).is_file()
            if kept and self.visible(folder.name, viewer, admin=admin):
                out.append({**summary(_load(folder)), **self._meta(folder.name)})
        current = self._incident_suite()
        if current is not None:
            out.append({**current, **self._meta(current["suite"])})
        return out

    def suite(self, suite_id_: str, *, viewer: str | None = None, admin: bool = False) -> dict[str, Any]:
        """One suite and its tasks; for ``viewer`` (a researcher) only one they may see, else the refusal names the
        suites they may."""
        try:
            folder = self.suites_root / check_suite_id(suite_id_)
        except BadRequest as e:
            raise BadRequest(f"{e.message}; {self._known(viewer, admin)}") from None
        if INCIDENT_SUITE_ID.fullmatch(suite_id_):
            if not (folder / CASES_FILE).is_file():
                raise UnknownSuite(f"no suite {suite_id_}: {self._known(viewer, admin)}")
            cases = json.loads((folder / CASES_FILE).read_text())
            return {**_incident_summary(suite_id_, cases), "tasks": [_case_task(c) for c in cases]}
        if not (folder / SUITE_FILE).is_file():
            raise UnknownSuite(f"no suite {suite_id_}: {self._known(viewer, admin)}")
        if not self.visible(suite_id_, viewer, admin=admin):
            owners = " or ".join(self._meta(suite_id_)["owners"]) or "its owner"
            raise UnknownSuite(
                f"suite {suite_id_} is not shared with you: {owners} can share it (`eval share {suite_id_}`); "
                f"{self._known(viewer, admin)}"
            )
        suite = _load(folder)
        self._keep_suite(folder, suite)
        return {**summary(suite), **self._meta(suite_id_), "tasks": [t.to_json() for t in suite.tasks]}

    # -- incident cases ------------------------------------------------------------------------------------------

    def from_incident(self, page_id: str, *, by: str) -> dict[str, Any]:
        """Freeze resolved page ``page_id`` (its cause recorded) into an eval case, kept beside the others, and the
        incident suite they now form (:mod:`labbot.evals.incidents.cases`). Making the same case again replaces it (a
        cause corrected). BadRequest says what to record when there is no cause; nothing is kept then."""

        def logs(run_id: str) -> str:
            return self.runs.logs(run_id, tail=80)

        case = freeze(self.runs.db, page_id, by=by, logs=logs, redactor=self.redactor)
        return self._keep_case(case)

    def from_feedback(self, feedback_id: str, *, by: str) -> dict[str, Any]:
        """Freeze a 👎 with a comment on an agent's answer into a case of the incident suite
        (:mod:`labbot.evals.incidents.feedback_cases`), kept like an incident case; the suite the cases now form. Making
        it again replaces it (a comment corrected)."""
        case = freeze_feedback(self.runs.db, feedback_id, by=by, redactor=self.redactor)
        return self._keep_case(case)

    def _keep_case(self, case: dict[str, Any]) -> dict[str, Any]:
        cases_dir = self.suites_root / CASES_DIR
        cases_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._lock:
            _write_atomic(cases_dir / f"{case['id']}.json", json.dumps(case, indent=1, sort_keys=True))
            suite = self._incident_suite()
            assert suite is not None
            if self.artifacts is not None:
                self._store(f"{case['id']}.json", io.BytesIO(json.dumps(case).encode()), "application/json")
        return {"case": case, "suite": suite}

    def _incident_cases(self) -> list[dict[str, Any]]:
        folder = self.suites_root / CASES_DIR
        if not folder.is_dir():
            return []
        return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json")) if CASE_ID.fullmatch(p.stem)]

    def _incident_suite(self) -> dict[str, Any] | None:
        """The suite of every incident case kept now (written once per version: its id is its content's hash)."""
        cases = self._incident_cases()
        if not cases:
            return None
        sid = suite_of(cases)
        folder = self.suites_root / sid
        if not (folder / CASES_FILE).is_file():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            _write_atomic(folder / CASES_FILE, json.dumps(cases, indent=1, sort_keys=True))
        return _incident_summary(sid, cases)

    def _known(self, viewer: str | None = None, admin: bool = False) -> str:
        known = [s["suite"] for s in self.suites(viewer, admin=admin)]
        if not known and viewer is not None:
            return "there is no suite you can run yet (`eval generate` makes one; another's must be shared first)"
        if not known:
            return "labbot has no suites yet (`eval generate` makes one)"
        says = "labbot has" if viewer is None else "you can run"
        return f"{says} {', '.join(known[:5])}" + (f" and {len(known) - 5} more" if len(known) > 5 else "")

    def _keep_suite(self, folder: Path, suite: Suite) -> None:
        """A suite written by an ``eval-generate`` job goes into the artifact store the first time it is used."""
        if self.artifacts is None:
            return
        name = f"{suite.id}.tar.gz"
        with self._lock:
            if any(row.get("name") == name for row in self.artifacts.list(EVALS_OWNER, include_shared=False)):
                return
            self._store(name, io.BytesIO(pack(folder)), "application/gzip")

    # -- runs --------------------------------------------------------------------------------------------------

    def launch(
        self,
        suite_id_: str,
        *,
        solver: str,
        owner: str,
        max_samples: int | None = None,
        name: str | None = None,
        idempotency_key: str | None = None,
        judge: str | None = None,
        viewer: str | None = None,
        admin: bool = False,
        solver_dir: str | None = None,
        allow_hosts: list[str] | None = None,
        solver_env: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """An eval run of a suite as a labbot run. With ``viewer`` (a researcher asking from Slack), only a suite they
        may see: a suite another researcher has not shared is refused like an unknown one. ``solver_dir`` (a name of
        ``[eval] solver_dirs``), ``allow_hosts`` (each allowed by ``[eval] solver_hosts``) and ``solver_env`` (the
        caller's variables: kept in a file for the job, never in the run's params) are a command solver's
        (:mod:`labbot.evals.running.solver_access`)."""
        self.suite(suite_id_, viewer=viewer, admin=admin)  # 404 before anything is created
        job = EVAL_JOB
        params: dict[str, Any] = {"suite": suite_id_, "solver": solver}
        if INCIDENT_SUITE_ID.fullmatch(suite_id_):
            from labbot.evals.incidents.job import check_incident_solver

            check_incident_solver(solver)  # BadRequest naming what an incident suite accepts
            job = EVAL_INCIDENTS_JOB
            if judge:
                params["judge"] = judge
        else:
            from labbot.evals.running.solvers import (
                parse_solver,  # inspect is a heavy import; only launches need it here
            )

            spec = parse_solver(solver)  # BadRequest naming the accepted forms, before anything is created
            agent_ready(spec, self.runs.registry.get(EVAL_JOB).env)  # a model and its key where the job runs
            if spec.kind != "cmd" and (solver_dir or allow_hosts or solver_env):
                raise BadRequest(
                    "--solver-dir, --allow-host and --solver-env are for a command solver (e.g. --solver "
                    f"'/solver/bin/my-agent --task \"$LABBOT_TASK_FILE\"'), not {spec.label}"
                )
            if solver_dir:
                params["solver_dir"] = self.access.solver_dir(solver_dir)
            if allow_hosts:
                params["allow_hosts"] = ",".join(self.access.hosts(allow_hosts))
        if job != EVAL_JOB and (solver_dir or allow_hosts or solver_env):
            raise BadRequest("--solver-dir, --allow-host and --solver-env are for a command solver of a code suite")
        if max_samples is not None and job == EVAL_JOB:
            params["max_samples"] = max_samples
        if job == EVAL_JOB:
            nodes = self.runs.nodes_with_cpus()
            params["fan_out"] = "off" if nodes is not None and nodes < 2 else "auto"
        env = check_secret_env(solver_env or {})
        ident = None
        if env:
            ident = write_secrets(self.suites_root, env)
            params.update(solver_env=",".join(env), solver_env_file=ident)
        req = LaunchRequest(job=job, owner=owner, params=params, name=name, idempotency_key=idempotency_key)
        try:
            run = self.runs.launch(req).run
        except BaseException:
            if ident is not None:
                drop_secrets(self.suites_root, ident)
            raise
        if ident is not None and (run.get("params") or {}).get("solver_env_file") != ident:
            drop_secrets(self.suites_root, ident)  # the idempotency key named a run launched before: not this file
        return run

    def results(self, run_id: str, *, viewer: str | None = None, admin: bool = False) -> dict[str, Any]:
        """The run with its eval results: ``suite``, ``solver``, ``pass_rate``, ``samples``, ``isolation``... (the
        job's ``results.json``), or only the run and ``status`` while it has not written them. For ``viewer``, only a
        run of a suite they may run (:meth:`visible`): another's is refused exactly like an unknown id, naming the
        eval runs they can see."""
        try:
            run = self.runs.get(run_id)
        except UnknownRun:
            if viewer is None:
                raise
            run = None
        if run is not None and run.get("job") not in EVAL_JOBS:
            raise NotAnEvalRun(f"run {run_id} is a {run.get('job')} run, not an eval run (`labbot eval list`)")
        if run is None or not self._run_visible(run, viewer, admin, {}):
            raise UnknownRun(f"no eval run {run_id[:40]!r} that you can see; {self._known_runs(viewer, admin)}")
        return self._results(run)

    def _results(self, run: dict[str, Any]) -> dict[str, Any]:
        run_id = str(run["id"])
        params = run.get("params") or {}
        out: dict[str, Any] = {
            "id": run_id,
            "suite": params.get("suite"),
            "solver": params.get("solver"),
            "status": run.get("status"),
            "run": run,
        }
        folder = eval_dir(self.runs.checkpoint_root, run_id)
        results = folder / RESULTS
        if results.is_file():
            doc = json.loads(results.read_text())
            out.update({k: v for k, v in doc.items() if k not in ("id", "status")})
            out["eval_status"] = doc.get("status")
            samples = out.get("samples") or []
            out["interval"] = wilson(sum(bool(s.get("passed")) for s in samples), len(samples)).to_json()
            if run.get("status") in ("succeeded", "failed", "stopped"):
                out["log_artifact"] = self._keep_log(run_id, folder / str(doc.get("log") or ""))
        return out

    def _run_visible(self, run: dict[str, Any], viewer: str | None, admin: bool, seen: dict[str, bool]) -> bool:
        """Whether ``viewer`` may see an eval run: whoever may run its suite (``seen`` caches that per suite)."""
        suite = str((run.get("params") or {}).get("suite") or "")
        if suite not in seen:
            seen[suite] = self.visible(suite, viewer, admin=admin)
        return seen[suite]

    def _visible_runs(self, limit: int, viewer: str | None, admin: bool) -> list[dict[str, Any]]:
        """The newest eval runs ``viewer`` may see (among the newest ``4 * limit`` runs of any job)."""
        seen: dict[str, bool] = {}
        rows = self.runs.runs(limit=limit * 4)
        return [r for r in rows if r.get("job") in EVAL_JOBS and self._run_visible(r, viewer, admin, seen)][:limit]

    def _known_runs(self, viewer: str | None, admin: bool) -> str:
        """The eval runs ``viewer`` can see, as a refusal names them (like :meth:`_known` names suites)."""
        known = [str(r["id"]) for r in self._visible_runs(50, viewer, admin)]
        if not known:
            return "there is no eval run you can see yet (`eval run SUITE` makes one; `eval list` shows the suites)"
        more = f" and {len(known) - 5} more" if len(known) > 5 else ""
        return f"eval runs you can see: {', '.join(known[:5])}{more} (`eval list` lists them)"

    def eval_runs(self, *, limit: int = 50, viewer: str | None = None, admin: bool = False) -> list[dict[str, Any]]:
        """The newest eval runs with their results; for ``viewer``, only those of suites they may run."""
        return [self._results(r) for r in self._visible_runs(limit, viewer, admin)]

    def compare(self, run_a: str, run_b: str, *, viewer: str | None = None, admin: bool = False) -> dict[str, Any]:
        """Two finished eval runs on the same tasks of the same suite, paired by task (:mod:`labbot.evals.stats`);
        BadRequest says what differs when they cannot be compared. For ``viewer``, a run they may not see is refused
        as :meth:`results` refuses it."""
        if run_a == run_b:
            raise BadRequest(f"both runs are {run_a}: compare two different eval runs of one suite")
        a, b = self.results(run_a, viewer=viewer, admin=admin), self.results(run_b, viewer=viewer, admin=admin)
        for doc in (a, b):
            if doc.get("eval_status") is None or not doc.get("samples"):
                raise BadRequest(
                    f"eval run {doc['id']} has no results yet ({doc['status']}): compare it once it has finished"
                )
        if a["suite"] != b["suite"]:
            raise BadRequest(
                f"{run_a} ran {a['suite']} and {run_b} ran {b['suite']}: a comparison needs two runs of one suite"
            )
        verdicts_a = {str(s["task"]): bool(s["passed"]) for s in a["samples"]}
        verdicts_b = {str(s["task"]): bool(s["passed"]) for s in b["samples"]}
        differs = task_set_difference(list(verdicts_a), list(verdicts_b))
        if differs:
            raise BadRequest(
                f"{run_a} and {run_b} ran different tasks of {a['suite']} ({differs}): compare runs of the same "
                "tasks (run both without --max-samples limits on which tasks, or with the same task list)"
            )

        # an unjudged case (the judge unreachable or answering nonsense) counts as not passed in its run, but a
        # judge's outage in one run says nothing about the solvers: such tasks are left out of the pairing
        unjudged = sorted({str(s["task"]) for doc in (a, b) for s in doc["samples"] if s.get("verdict") == "unjudged"})
        for task in unjudged:
            verdicts_a.pop(task, None)
            verdicts_b.pop(task, None)
        if not verdicts_a:
            raise BadRequest(
                f"every task of {a['suite']} was unjudged in {run_a} or {run_b} (the judge model could not be asked "
                "or gave no verdict): run them again with a judge that answers (--judge PROVIDER/MODEL)"
            )

        def side(doc: dict[str, Any]) -> dict[str, Any]:
            keys = ("id", "solver", "pass_rate", "interval", "untrusted")
            return {k: doc.get(k) for k in keys}

        return {
            "suite": a["suite"],
            "a": side(a),
            "b": side(b),
            "untrusted": bool(a.get("untrusted") or b.get("untrusted")),
            "unjudged_left_out": unjudged,
            **compare(verdicts_a, verdicts_b).to_json(),
        }

    def saturation(self, suite_id_: str, *, limit: int = 200) -> dict[str, Any]:
        """Each solver's latest finished, sealed run of the suite, and whether they all pass ≥ 90 % of it (gold and
        none, which check the suite itself, do not count). Every run of the suite counts: whoever may see the suite
        may see its runs, so a caller shows this only to them (as ``GET /api/v1/evals/suites/ID?by=`` does)."""
        latest: dict[str, dict[str, Any]] = {}
        for doc in self.eval_runs(limit=limit):
            if doc.get("suite") != suite_id_ or doc.get("eval_status") != "succeeded" or doc.get("untrusted"):
                continue
            if doc.get("solver") in REFERENCE_SOLVERS:
                continue
            latest.setdefault(str(doc.get("solver")), doc)  # newest first
        rates = {solver: float(doc.get("pass_rate") or 0.0) for solver, doc in latest.items()}
        return {
            "suite": suite_id_,
            "solvers": {solver: {"run": doc["id"], "pass_rate": rates[solver]} for solver, doc in latest.items()},
            "saturated": saturated(rates),
        }

    def _keep_log(self, run_id: str, log: Path) -> str | None:
        """The run's .eval log in the artifact store (once): its artifact id."""
        if self.artifacts is None or not log.is_file() or log.suffix != ".eval":
            return None
        name = f"{run_id}.eval"
        with self._lock:
            for row in self.artifacts.list(EVALS_OWNER, include_shared=False):
                if row.get("name") == name:
                    return str(row["id"])
            with log.open("rb") as f:
                return self._store(name, f, "application/zip")

    def _store(self, name: str, data: IO[bytes], content_type: str) -> str:
        assert self.artifacts is not None
        row = self.artifacts.put(EVALS_OWNER, name, data, content_type=content_type)
        return str(row["id"])


def summary(suite: Suite) -> dict[str, Any]:
    return {
        "suite": suite.id,
        "source": suite.source,
        "commit": suite.commit,
        "seed": suite.seed,
        "tasks": len(suite.tasks),
        "flaky": suite.flaky,
    }


def _incident_summary(suite_id_: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    return {"suite": suite_id_, "source": "incidents", "commit": "", "seed": 0, "tasks": len(cases), "flaky": []}


def _case_task(case: dict[str, Any]) -> dict[str, Any]:
    if case.get("kind") == "feedback":
        question = str(case.get("question") or "")
        return {"id": case["id"], "kind": "feedback", "summary": question[:200], "cause": case.get("cause")}
    page = case.get("page") or {}
    return {"id": case["id"], "kind": page.get("kind"), "summary": page.get("summary"), "cause": case.get("cause")}


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _load(folder: Path) -> Suite:
    return Suite.from_json(json.loads((folder / SUITE_FILE).read_text()))


def _unpack(archive: IO[bytes], dest: Path) -> None:
    """A suite archive into ``dest``: tar's ``data`` filter refuses absolute paths, ``..``, links out of the folder
    and device files; the unpacked size is bounded."""
    try:
        with tarfile.open(fileobj=archive, mode="r:gz") as tar:
            total = 0
            for member in tar:
                total += max(member.size, 0)
                if total > MAX_SUITE_BYTES:
                    raise BadRequest(f"the suite unpacks to more than {format_bytes(MAX_SUITE_BYTES)}")
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, EOFError, OSError) as e:
        shutil.rmtree(dest, ignore_errors=True)
        raise BadRequest(f"the suite is not a readable .tar.gz of a suite folder: {e}") from None
    # an archive of the folder itself (suite-x/suite.json) is accepted as well as one of its contents
    entries = list(dest.iterdir()) if dest.is_dir() else []
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / SUITE_FILE).is_file():
        inner = entries[0]
        for item in list(inner.iterdir()):
            item.rename(dest / item.name)
        inner.rmdir()


def _checked(folder: Path) -> Suite:
    path = folder / SUITE_FILE
    if not path.is_file():
        raise BadRequest(f"the archive has no {SUITE_FILE}: send a folder made by `labbot eval generate`")
    try:
        doc = json.loads(path.read_text())
        suite = Suite.from_json(doc)
    except (ValueError, TypeError) as e:
        raise BadRequest(f"{SUITE_FILE} is not a suite: {e}") from None
    if not SUITE_ID.fullmatch(suite.id) or suite_id(doc) != suite.id:
        raise BadRequest(f"{SUITE_FILE}'s id {suite.id!r} does not match its content: the suite was edited")
    if not suite.tasks:
        raise BadRequest("the suite has no tasks")
    allowed = sorted(TOOLCHAIN_IMPORTS.values())
    if not set(suite.toolchain) <= set(allowed):
        raise BadRequest(f"the suite's toolchain may name only {', '.join(allowed)} (the trees its tests import)")
    for task in suite.tasks:
        if not TASK_ID.fullmatch(task.id):
            raise BadRequest(f"task id {task.id[:60]!r} is not of the format (lowercase letters, digits, - and _)")
        if not (folder / "tasks" / task.id / "repo").is_dir():
            raise BadRequest(f"task {task.id} has no tasks/{task.id}/repo folder")
        if not set(task.hidden) <= set(task.fail_to_pass):
            raise BadRequest(f"task {task.id}'s hidden tests must be among its fail_to_pass tests")
    if not (folder / "original").is_dir():
        raise BadRequest("the suite has no original/ folder (the tests are restored from it when scoring)")
    return suite


def pack(folder: Path) -> bytes:
    """A suite folder as the .tar.gz :meth:`EvalService.add_suite` takes (what the CLI sends)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for item in sorted(folder.iterdir()):
            tar.add(item, arcname=item.name)
    return buf.getvalue()
