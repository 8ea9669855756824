"""The database handle: engine, sessions and migrations applied on start.

``Database(url)`` opens any SQLAlchemy URL; SQLite gets WAL, a busy timeout and foreign keys, and its file is made
0600 before SQLite opens it (SQLite gives the WAL and shared-memory files the database file's mode). ``upgrade()`` runs
the Alembic migrations shipped in ``storage/migrations`` (``labbot db upgrade`` and every ``labbot serve``).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, insert, make_url, text
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS = Path(__file__).parent / "migrations"


def default_sqlite_url(home: Path) -> str:
    return f"sqlite:///{(home / 'labbot.db').resolve()}"


def json_loads(text: str | bytes) -> Any:
    """JSON columns are read with orjson (the watchdog reads thousands of them a tick); a document holding the
    non-standard ``NaN``/``Infinity`` literals that Python's json module writes still reads, through json."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


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
    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = url
        kwargs: dict[str, Any] = {"echo": echo, "future": True, "json_deserializer": json_loads}
        if url.startswith("sqlite"):
            _private_sqlite_file(url)
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 10}
        self.engine: Engine = create_engine(url, **kwargs)
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error."""
        with self._sessions() as session, session.begin():
            yield session

    def upgrade(self, revision: str = "head") -> None:
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)

    def insert_ignoring_duplicates(self, model: type[Any]) -> Any:
        """An INSERT that skips rows whose unique key already exists (SQLite and Postgres), else a plain one."""
        name = self.engine.dialect.name
        if name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            return sqlite_insert(model).on_conflict_do_nothing()
        if name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(model).on_conflict_do_nothing()
        return insert(model)

    def ping(self) -> None:
        """``SELECT 1`` on a connection of the pool: raises when the database does not answer (``/readyz``)."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def dispose(self) -> None:
        self.engine.dispose()
