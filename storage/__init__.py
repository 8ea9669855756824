"""Storage: SQLAlchemy models, Alembic migrations and the database handle.

Below training and agents: imports nothing from labbot but ``labbot.common``. SQLite (WAL) by default, PostgreSQL
(psycopg 3) by ``LABBOT_DATABASE_URL=postgresql://…``; the models use nothing SQLite-only.
"""

from labbot.storage.db import Database, default_sqlite_url
from labbot.storage.floats import decode_float, encode_float
from labbot.storage.models import LaunchKey, MetricPoint, Run, RunStatus, RunThread, ThreadMessage

__all__ = [
    "Database",
    "LaunchKey",
    "MetricPoint",
    "Run",
    "RunStatus",
    "RunThread",
    "ThreadMessage",
    "decode_float",
    "default_sqlite_url",
    "encode_float",
]
