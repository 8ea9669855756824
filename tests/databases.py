"""Which databases the tests run on: SQLite, and the real PostgreSQL server when it is reachable (pytest plugin).

* A test module (or test) marked ``@pytest.mark.databases`` gets its ``backend`` fixture — and so ``db``,
  ``database_url`` and ``empty_database_url`` — parametrized over the selected backends: ``test_x[sqlite]`` and
  ``test_x[postgresql]``. The PostgreSQL variants also carry the ``postgresql`` marker, so
  ``-m "not postgresql"`` leaves them out and ``-m postgresql`` runs only them. Unmarked tests use SQLite.
* The selection: ``--databases sqlite,postgresql`` (the default: both) or ``LABBOT_TEST_DATABASES``. With
  ``--databases postgresql`` alone, every test that takes a ``db`` runs on PostgreSQL, marked or not.
* The server: ``LABBOT_TEST_DATABASE_URL`` (default ``postgresql://postgres@127.0.0.1/postgres``), a URL of a
  maintenance database the user may ``CREATE DATABASE`` from. Each test gets a database of its own,
  ``labbot_test_<random>``, copied from one migrated template per worker (about 30 ms), and dropped after the test
  (``WITH (FORCE)``: its connections are cut first); the template is dropped at the end of the session. SQLite the
  same way: a file migrated once per worker, copied for each test (a copy is ~3 ms, a migration ~50 ms).
* Not reachable: outside CI the PostgreSQL variants are skipped (the reason begins ``PostgreSQL NOT RUN``) and one
  loud line at the end of the run says how many and why; with ``CI=true`` they fail.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from labbot.storage.db import Database, normalize_database_url

BACKENDS = ("sqlite", "postgresql")
URL_ENV = "LABBOT_TEST_DATABASE_URL"
SELECT_ENV = "LABBOT_TEST_DATABASES"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1/postgres"
NOT_RUN = "PostgreSQL NOT RUN"
"""Begins every skip reason (and failure message) for an unreachable server: how the end-of-run line counts them."""
PREFIX = "labbot_test_"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--databases",
        default=os.environ.get(SELECT_ENV, ",".join(BACKENDS)),
        help=f"comma-separated backends the database tests run on: sqlite, postgresql (default both; {SELECT_ENV})",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "databases: runs on each selected database backend (SQLite and PostgreSQL)")
    config.addinivalue_line("markers", "postgresql: the PostgreSQL variant of a `databases` test")
    chosen = [b.strip() for b in str(config.getoption("--databases")).split(",") if b.strip()]
    unknown = sorted(set(chosen) - set(BACKENDS))
    if unknown or not chosen:
        raise pytest.UsageError(f"--databases {','.join(chosen)!r}: expected a comma-separated subset of {BACKENDS}")
    _selected[:] = [b for b in BACKENDS if b in chosen]


_selected: list[str] = list(BACKENDS)


def selected() -> list[str]:
    return list(_selected)


def default_backend() -> str:
    """What an unmarked test's ``db`` is: SQLite, unless only PostgreSQL is selected."""
    return "sqlite" if "sqlite" in _selected else "postgresql"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames or not metafunc.definition.get_closest_marker("databases"):
        return
    params = [pytest.param(b, marks=[pytest.mark.postgresql] if b == "postgresql" else [], id=b) for b in _selected]
    metafunc.parametrize("backend", params, indirect=True)


# -- the server -------------------------------------------------------------------------------------------------


def server_url() -> str:
    return os.environ.get(URL_ENV) or DEFAULT_SERVER


@functools.cache
def _problem() -> str | None:
    """Why PostgreSQL cannot be used (None: it can), asked once per process."""
    try:
        url = normalize_database_url(server_url())
    except Exception as e:  # a BadRequest naming what is accepted
        return f"{URL_ENV} is not usable: {e}"
    if url.get_backend_name() != "postgresql":
        return f"{URL_ENV} must be a postgresql:// URL, got {url.render_as_string(hide_password=True)}"
    try:
        with _admin().connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as e:
        reason = " ".join(str(getattr(e, "orig", None) or e).split())
        return f"the server at {url.render_as_string(hide_password=True)} does not answer ({reason[:200]})"
    return None


@functools.cache
def _admin() -> Engine:
    """The maintenance database, autocommit (CREATE/DROP DATABASE run outside a transaction)."""
    return create_engine(normalize_database_url(server_url()), isolation_level="AUTOCOMMIT", poolclass=NullPool)


def _url_of(name: str) -> str:
    """A plain ``postgresql://`` URL, as a person writes it: labbot chooses the driver."""
    url = normalize_database_url(server_url()).set(drivername="postgresql", database=name)
    return url.render_as_string(hide_password=False)


def require_postgresql() -> None:
    """Skip (outside CI) or fail (``CI=true``) the test when the server is not reachable."""
    problem = _problem()
    if problem is None:
        return
    reason = f"{NOT_RUN}: {problem}; start PostgreSQL or set {URL_ENV} (or --databases sqlite)"
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the PostgreSQL tests must run)", pytrace=False)
    pytest.skip(reason)


@functools.cache
def _template() -> str:
    """One database per worker migrated to head; every test's database is a copy of it."""
    name = f"{PREFIX}template_{uuid.uuid4().hex[:10]}"
    with _admin().connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    db = Database(_url_of(name))
    try:
        db.upgrade()
    finally:
        db.dispose()  # CREATE DATABASE … TEMPLATE needs it to have no connections
    return name


@functools.cache
def _sqlite_template() -> Path:
    """One SQLite file per worker migrated to head; every test's SQLite database is a copy of it."""
    path = Path(tempfile.mkdtemp(prefix="labbot-sqlite-template-")) / "labbot.db"
    db = Database(f"sqlite:///{path}")
    try:
        db.upgrade()
    finally:
        db.dispose()
    return path


def sqlite_copy(path: Path) -> str:
    """A migrated SQLite database at ``path`` (a copy of the worker's template); its URL."""
    shutil.copyfile(_sqlite_template(), path)
    return f"sqlite:///{path}"


def create_database(*, migrated: bool) -> str:
    """A fresh database's URL: an empty one, or a copy of the migrated template."""
    name = f"{PREFIX}{uuid.uuid4().hex[:16]}"
    template = f' TEMPLATE "{_template()}"' if migrated else ""
    with _admin().connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"{template}'))
    return _url_of(name)


def drop_database(url: str) -> None:
    name = make_url(url).database
    assert name and name.startswith(PREFIX), name  # only what this plugin created
    with _admin().connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def refuse_connections(url: str, *, refuse: bool = True) -> int:
    """A PostgreSQL restart as the clients of one database see it, without restarting the server the other tests
    share: with ``refuse``, new connections to the database are refused (``ALLOW_CONNECTIONS false``: "database is
    not currently accepting connections") and those open are cut (``pg_terminate_backend``); returns how many were
    cut. ``refuse=False`` lets connections in again."""
    name = make_url(url).database
    assert name and name.startswith(PREFIX), name  # only what this plugin created
    with _admin().connect() as conn:
        conn.execute(text(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS {"false" if refuse else "true"}'))
        if not refuse:
            return 0
        cut = conn.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = :n AND pid <> pg_backend_pid()"
            ),
            {"n": name},
        ).scalar_one()
    return int(cut)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _template.cache_info().currsize:
        drop_database(_url_of(_template()))
    if _sqlite_template.cache_info().currsize:
        shutil.rmtree(_sqlite_template().parent, ignore_errors=True)


# -- the fixtures -----------------------------------------------------------------------------------------------


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or ``postgresql``: the parameter of a ``databases`` test, else the default backend."""
    name = str(getattr(request, "param", default_backend()))
    if name == "postgresql":
        require_postgresql()
    return name


def _database_url(backend: str, tmp_path: Path, *, migrated: bool) -> Iterator[str]:
    if backend == "sqlite":
        yield sqlite_copy(tmp_path / "labbot.db") if migrated else f"sqlite:///{tmp_path / 'labbot.db'}"
        return
    url = create_database(migrated=migrated)
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture
def database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A URL of a database of this test's own, migrated to head (SQLite in ``tmp_path``, or a PostgreSQL copy)."""
    yield from _database_url(backend, tmp_path, migrated=True)


@pytest.fixture
def empty_database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """Like ``database_url``, with nothing in it (the migration tests start here)."""
    yield from _database_url(backend, tmp_path, migrated=False)


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    """The test's own database, migrated to the latest revision (a module may define its own)."""
    database = Database(database_url)
    yield database
    database.dispose()


# -- the end-of-run line ----------------------------------------------------------------------------------------

_not_run: dict[str, str] = {}


def _reason(report: pytest.TestReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr or "")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if (report.skipped or report.failed) and NOT_RUN in _reason(report):
        _not_run.setdefault(report.nodeid, report.outcome)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: Any) -> Generator[None, None, None]:
    yield
    if not _not_run:
        return
    skipped = sum(1 for outcome in _not_run.values() if outcome == "skipped")
    failed = len(_not_run) - skipped
    what = f"{skipped} skipped" if not failed else f"{failed} FAILED" + (f", {skipped} skipped" if skipped else "")
    terminalreporter.write_line(
        f"!!! {len(_not_run)} PostgreSQL test variant(s) NOT RUN ({what}): {_problem() or 'the server did not answer'}"
        f" — start PostgreSQL or set {URL_ENV} !!!",
        red=bool(failed),
        yellow=not failed,
        bold=True,
    )
