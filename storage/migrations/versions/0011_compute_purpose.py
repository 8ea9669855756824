"""compute by purpose: runs.purpose, runs.priority, runs.queued_at (the queue's order, indexed) and admission_lock,
the row every admission decision locks first; existing runs' purpose backfilled from their config, else training

Revision ID: 0011
Revises: 0010 (re-point to 0010 when the 0010 migration is merged before this one)
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

PURPOSES = ("training", "eval", "data", "research", "serving")
BUILTIN_PURPOSES = {"eval": "eval", "eval-incidents": "eval", "eval-generate": "data"}  # the built-in jobs' own


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("purpose", sa.String(16), nullable=False, server_default="training"))
        batch.add_column(sa.Column("priority", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("queued_at", UTCDateTime(), nullable=True))
    op.create_index("ix_runs_queue", "runs", ["status", "purpose", "priority", "queued_at"])
    runs = sa.table(
        "runs",
        sa.column("id", sa.String),
        sa.column("job", sa.String),
        sa.column("config", sa.JSON),
        sa.column("purpose", sa.String),
    )
    conn = op.get_bind()
    for run_id, job, config in conn.execute(sa.select(runs.c.id, runs.c.job, runs.c.config)).all():
        purpose = config.get("purpose") if isinstance(config, dict) else None
        purpose = purpose if purpose in PURPOSES else BUILTIN_PURPOSES.get(job)
        if purpose and purpose != "training":
            conn.execute(runs.update().where(runs.c.id == run_id).values(purpose=purpose))
    op.create_table(
        "admission_lock",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("decisions", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
    )
    op.bulk_insert(sa.table("admission_lock", sa.column("id"), sa.column("decisions")), [{"id": 1, "decisions": 0}])


def downgrade() -> None:
    op.drop_table("admission_lock")
    op.drop_index("ix_runs_queue", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("queued_at")
        batch.drop_column("priority")
        batch.drop_column("purpose")
