"""Alembic environment: runs on the connection handed over by ``labbot.storage.db.Database.upgrade``."""

from alembic import context
from sqlalchemy import engine_from_config, pool

from labbot.storage.db import VERSION_TABLE
from labbot.storage.models import Base

config = context.config
target_metadata = Base.metadata


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True, version_table=VERSION_TABLE
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = engine_from_config(config.get_section(config.config_ini_section) or {}, poolclass=pool.NullPool)
    with engine.connect() as conn:
        context.configure(
            connection=conn, target_metadata=target_metadata, render_as_batch=True, version_table=VERSION_TABLE
        )
        with context.begin_transaction():
            context.run_migrations()


run()
