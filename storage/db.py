"""The database handle: engine, sessions and migrations applied on start.

``Database(url)`` opens SQLite or PostgreSQL. SQLite gets WAL, a busy timeout and foreign keys, and its file is made
0600 before SQLite opens it (SQLite gives the WAL and shared-memory files the database file's mode). A PostgreSQL URL
as people write it (``postgresql://user@host/db``, ``postgres://…``) is given labbot's driver, psycopg 3
(``postgresql+psycopg://``). Any other scheme, or a database that does not answer, is a ``BadRequest`` saying what is
accepted; a password in the URL is never shown (``display_url``). ``upgrade()`` runs the Alembic migrations shipped in
``storage/migrations`` (``labbot db upgrade`` and every ``labbot serve``); labbot's revision is kept in its own table,
``labbot_alembic_version`` (``VERSION_TABLE``), so the database can hold another Alembic user's tables beside
labbot's: Optuna's study storage (``labbot.training.experiments.study``) keeps its own in ``alembic_version``. A
database from before (labbot's revision in ``alembic_version``) has it moved at the next upgrade.

A session that fails because the database is away (PostgreSQL restarting or unreachable, SQLite's file locked past
its busy timeout) raises ``DatabaseUnavailable`` (503: try again), never the driver's error with its text. Inside
:func:`fenced` every session first runs the fence's check in its own transaction: the leader lease's fencing token
(``labbot.storage.lease``), so a replica that lost the lease cannot write as if it had it; :func:`current_fence` is
what a side effect outside the database is checked against first (``labbot.storage.lease.guard``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol

import orjson
from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import URL, Connection, Engine, create_engine, event, insert, inspect, make_url, text
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from labbot.common.errors import BadRequest, DatabaseUnavailable

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "labbot_alembic_version"
"""Where labbot's schema revision is kept (``alembic_version``, Alembic's default, is Optuna's)."""
ACCEPTED = (
    "sqlite:///PATH (the default: a file in LABBOT_HOME) or postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE "
    "(also postgres://…; labbot connects with psycopg 3)"
)
POSTGRES_DRIVER = "postgresql+psycopg"
# SQLite's OperationalError is also its error for bad SQL ("no such table"): only these mean "not now"
SQLITE_AWAY = ("database is locked", "unable to open database", "disk i/o error")


class Fence(Protocol):
    """What a session inside :func:`fenced` checks first (``labbot.storage.lease.Lease``): raises to refuse. Side
    effects outside the database are checked against it too (``labbot.storage.lease.guard``)."""

    @property
    def token(self) -> int | None: ...

    def check(self, session: Session) -> None: ...

    def confirm(self, what: str) -> None: ...

    def ensure(self, what: str, *, token: int | None = None) -> None: ...


_FENCE: ContextVar[Fence | None] = ContextVar("labbot_fence", default=None)


def current_fence() -> Fence | None:
    """The fence this context runs in (a singleton's lease), None outside one (an API request, an agent's turn)."""
    return _FENCE.get()


@contextmanager
def fenced(fence: Fence | None) -> Iterator[None]:
    """Every ``Database.session()`` opened in this context (its tasks and worker threads included: they copy the
    context) checks ``fence`` first; ``fenced(None)`` lifts it (work spawned from a singleton that is not one)."""
    reset = _FENCE.set(fence)
    try:
        yield
    finally:
        _FENCE.reset(reset)


def default_sqlite_url(home: Path) -> str:
    return f"sqlite:///{(home / 'labbot.db').resolve()}"


def json_loads(text: str | bytes) -> Any:
    """JSON columns are read with orjson (the watchdog reads thousands of them a tick); a document holding the
    non-standard ``NaN``/``Infinity`` literals that Python's json module writes still reads, through json."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def normalize_database_url(url: str) -> URL:
    """``url`` as labbot opens it: SQLite as given, PostgreSQL with its driver (``postgresql+psycopg``). Anything
    else is a ``BadRequest`` that says what is accepted (and never repeats a password)."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise BadRequest(f"LABBOT_DATABASE_URL is not a database URL; accepted: {ACCEPTED}") from None
    backend, _, driver = parsed.drivername.partition("+")
    if backend in ("postgresql", "postgres") and driver in ("", "psycopg"):
        return parsed.set(drivername=POSTGRES_DRIVER)
    if backend == "sqlite" and driver in ("", "pysqlite"):
        return parsed
    shown = parsed.render_as_string(hide_password=True)
    what = f"the driver {driver!r}" if backend in ("postgresql", "postgres", "sqlite") else f"{backend}://"
    raise BadRequest(f"LABBOT_DATABASE_URL {shown}: {what} is not supported; accepted: {ACCEPTED}")


def _json_dumps_strict(value: Any) -> str:
    """JSON for PostgreSQL, which refuses the ``NaN``/``Infinity`` literals Python's json writes: a non-finite float
    anywhere in the document is stored as its string (``"NaN"``, ``"Infinity"``, ``"-Infinity"``, as on the wire)."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _private_sqlite_file(url: str) -> None:
    """Create the SQLite file 0600 (and make an existing one, its WAL and shm 0600): they hold every run, token
    hash and audit row. SQLite creates ``-wal`` and ``-shm`` with the database file's mode."""
    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    if not path.parent.is_dir():
        return  # SQLite will say so when it opens it
    with contextlib.suppress(PermissionError):  # one we may not change: opened as it is
        os.close(os.open(path, os.O_RDONLY | os.O_CREAT, 0o600))
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            file.chmod(0o600)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.close()


class Database:
    def __init__(self, url: str | URL, *, echo: bool = False) -> None:
        parsed = normalize_database_url(url) if isinstance(url, str) else url
        self.url = parsed.render_as_string(hide_password=False)
        self.display_url = parsed.render_as_string(hide_password=True)
        """The URL with its password, if any, as ``***``: what logs and errors show."""
        kwargs: dict[str, Any] = {"echo": echo, "json_deserializer": json_loads}
        if parsed.get_backend_name() == "sqlite":
            _private_sqlite_file(self.url)
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 10}
        else:
            # a long-lived server's connections can be cut (a restart, a proxy's idle timeout): checked on checkout;
            # the connect timeout makes an unreachable host an error, not a hang
            kwargs.update(pool_pre_ping=True, json_serializer=_json_dumps_strict, connect_args={"connect_timeout": 10})
        self.engine: Engine = create_engine(parsed, **kwargs)
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return str(self.engine.dialect.name)

    def check(self) -> None:
        """Connect once: a database that cannot be reached is a ``BadRequest`` naming it (password hidden)."""
        try:
            with self.engine.connect():
                pass
        except DBAPIError as e:
            raise BadRequest(
                f"cannot connect to the database {self.display_url}: {self._reason(e)}; "
                f"LABBOT_DATABASE_URL accepts {ACCEPTED}"
            ) from None

    def _reason(self, e: DBAPIError) -> str:
        reason = " ".join(str(e.orig).split()) or type(e.orig).__name__
        password = make_url(self.url).password
        return reason.replace(str(password), "***") if password else reason

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error. Inside :func:`fenced`, the
        fence is checked first, in the same transaction. The database away: ``DatabaseUnavailable``."""
        try:
            with self._sessions() as session, session.begin():
                fence = _FENCE.get()
                if fence is not None:
                    fence.check(session)
                yield session
        except DBAPIError as e:
            if not self.away(e):
                raise
            raise DatabaseUnavailable(
                f"the database did not answer ({type(e.orig).__name__}): it may be restarting; try again in a few "
                "seconds"
            ) from e

    def away(self, e: DBAPIError) -> bool:
        """Whether ``e`` says the database cannot be reached now (rather than that the statement was wrong)."""
        if e.connection_invalidated:
            return True
        if self.engine.dialect.name == "sqlite":
            return isinstance(e, OperationalError) and any(m in str(e.orig).lower() for m in SQLITE_AWAY)
        return isinstance(e, OperationalError | InterfaceError)

    def upgrade(self, revision: str = "head") -> None:
        self.check()
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.begin() as conn:
            _move_version_table(conn, ScriptDirectory.from_config(cfg))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)

    def revision(self) -> str | None:
        """labbot's schema revision in this database (None before the first upgrade)."""
        with self.engine.connect() as conn:
            return schema_revision(conn)

    def insert_ignoring_duplicates(self, model: type[Any]) -> Any:
        """An INSERT that skips rows whose unique key already exists (``ON CONFLICT DO NOTHING`` on SQLite and
        PostgreSQL); its result's ``rowcount`` is the rows inserted. (SQLAlchemy reads an INSERT's rowcount only when
        asked to: psycopg's cursor forgets it once closed, SQLite's does not.)"""
        name = self.engine.dialect.name
        if name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            stmt: Any = sqlite_insert(model).on_conflict_do_nothing()
        elif name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            stmt = pg_insert(model).on_conflict_do_nothing()
        else:
            stmt = insert(model)
        return stmt.execution_options(preserve_rowcount=True)

    def ping(self) -> None:
        """``SELECT 1`` on a connection of the pool: raises when the database does not answer (``/readyz``)."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def dispose(self) -> None:
        self.engine.dispose()


def schema_revision(conn: Connection) -> str | None:
    """labbot's schema revision as recorded on ``conn`` (in ``VERSION_TABLE``)."""
    return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


def _move_version_table(conn: Connection, scripts: ScriptDirectory) -> None:
    """A database upgraded before labbot kept its revision in ``VERSION_TABLE`` has it in ``alembic_version``: moved
    there (in the upgrade's transaction), and ``alembic_version`` dropped, when it holds one of labbot's revisions.
    One that holds another's (Optuna's) is left alone."""
    tables = set(inspect(conn).get_table_names())
    if VERSION_TABLE in tables or "alembic_version" not in tables:
        return
    revision = MigrationContext.configure(conn).get_current_revision()
    if revision is None:
        return
    try:
        scripts.get_revision(revision)
    except CommandError:
        return  # not one of labbot's
    ours = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    ours.stamp(scripts, revision)
    conn.execute(text("DROP TABLE alembic_version"))
