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
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from labbot.common.errors import BadRequest, LabbotError
from labbot.evals.suite import SUITE_FILE, SUITE_ID, TASK_ID, Suite, suite_id
from labbot.storage.artifacts import ArtifactStore
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest

EVALS_OWNER = "evals"
EVAL_JOB = "eval"
EVAL_GENERATE_JOB = "eval-generate"
RESULTS = "results.json"
MAX_SUITE_BYTES = 500 << 20  # unpacked


class UnknownSuite(LabbotError):
    status = 404
    code = "unknown_suite"


class NotAnEvalRun(LabbotError):
    status = 404
    code = "not_an_eval_run"


def check_suite_id(value: str) -> str:
    if not SUITE_ID.fullmatch(value):
        raise BadRequest(f"{value[:60]!r} is not a suite id: suite- and 12 hex digits, as `labbot eval list` shows")
    return value


def eval_dir(run_root: Path, run_id: str) -> Path:
    """Where an eval run's job writes its results and log (beside the run's checkpoints folder)."""
    return run_root / run_id / "eval"


class EvalService:
    def __init__(self, runs: RunService, artifacts: ArtifactStore | None, suites_root: Path) -> None:
        self.runs = runs
        self.artifacts = artifacts
        self.suites_root = suites_root
        self._lock = threading.Lock()

    # -- suites ------------------------------------------------------------------------------------------------

    def add_suite(self, archive: IO[bytes]) -> dict[str, Any]:
        """Check and keep a suite sent as a .tar.gz of its folder; the same suite again is a no-op."""
        self.suites_root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.TemporaryDirectory(dir=self.suites_root, prefix=".incoming-") as tmp:
            folder = Path(tmp) / "suite"
            _unpack(archive, folder)
            suite = _checked(folder)
            dest = self.suites_root / suite.id
            with self._lock:
                if not dest.exists():
                    folder.rename(dest)
                if self.artifacts is not None:
                    archive.seek(0)
                    self._store(f"{suite.id}.tar.gz", archive, "application/gzip")
        return summary(suite)

    def suites(self) -> list[dict[str, Any]]:
        if not self.suites_root.is_dir():
            return []
        out = []
        for folder in sorted(self.suites_root.iterdir()):
            if SUITE_ID.fullmatch(folder.name) and (folder / SUITE_FILE).is_file():
                out.append(summary(_load(folder)))
        return out

    def suite(self, suite_id_: str) -> dict[str, Any]:
        folder = self.suites_root / check_suite_id(suite_id_)
        if not (folder / SUITE_FILE).is_file():
            raise UnknownSuite(f"no suite {suite_id_}: `labbot eval list` shows the suites labbot has")
        suite = _load(folder)
        self._keep_suite(folder, suite)
        return {**summary(suite), "tasks": [t.to_json() for t in suite.tasks]}

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
    ) -> dict[str, Any]:
        self.suite(suite_id_)  # 404 before anything is created
        params: dict[str, Any] = {"suite": suite_id_, "solver": solver}
        if max_samples is not None:
            params["max_samples"] = max_samples
        req = LaunchRequest(job=EVAL_JOB, owner=owner, params=params, name=name, idempotency_key=idempotency_key)
        return self.runs.launch(req).run

    def results(self, run_id: str) -> dict[str, Any]:
        """The run with its eval results: ``suite``, ``solver``, ``pass_rate``, ``samples``, ``isolation``... (the
        job's ``results.json``), or only the run and ``status`` while it has not written them."""
        run = self.runs.get(run_id)
        if run.get("job") != EVAL_JOB:
            raise NotAnEvalRun(f"run {run_id} is a {run.get('job')} run, not an eval run (`labbot eval list`)")
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
            if run.get("status") in ("succeeded", "failed", "stopped"):
                out["log_artifact"] = self._keep_log(run_id, folder / str(doc.get("log") or ""))
        return out

    def eval_runs(self, *, limit: int = 50) -> list[dict[str, Any]]:
        return [self.results(r["id"]) for r in self.runs.runs(limit=limit * 4) if r.get("job") == EVAL_JOB][:limit]

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
                    raise BadRequest(f"the suite unpacks to more than {MAX_SUITE_BYTES >> 20} MiB")
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
    for task in suite.tasks:
        if not TASK_ID.fullmatch(task.id):
            raise BadRequest(f"task id {task.id[:60]!r} is not of the format (lowercase letters, digits, - and _)")
        if not (folder / "tasks" / task.id / "repo").is_dir():
            raise BadRequest(f"task {task.id} has no tasks/{task.id}/repo folder")
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
