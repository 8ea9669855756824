"""watchdog columns on runs; incidents and the delivery outbox (babysitter and paging)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("attempt_started_at", UTCDateTime()))
        batch.add_column(sa.Column("vitals", sa.JSON(), nullable=False, server_default="{}"))
        batch.add_column(sa.Column("auto_restarts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("restart_at", UTCDateTime()))
    op.create_table(
        "incidents",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("key", sa.String(200), nullable=False, unique=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE")),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("severity", sa.String(8), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("escalation_level", sa.Integer(), nullable=False),
        sa.Column("occurrence", sa.Integer(), nullable=False),
        sa.Column("reopened", sa.Integer(), nullable=False),
        sa.Column("condition_active", sa.Boolean(), nullable=False),
        sa.Column("pagerduty_open", sa.Boolean(), nullable=False),
        sa.Column("triggered_at", UTCDateTime(), nullable=False),
        sa.Column("acknowledged_at", UTCDateTime()),
        sa.Column("acknowledged_by", sa.String(100)),
        sa.Column("resolved_at", UTCDateTime()),
        sa.Column("resolved_by", sa.String(100)),
        sa.Column("next_escalation_at", UTCDateTime()),
        sa.Column("next_renotify_at", UTCDateTime()),
        sa.Column("renotified", sa.Integer(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_incidents_run_id", "incidents", ["run_id"])
    op.create_index("ix_incidents_state", "incidents", ["state"])
    op.create_table(
        "deliveries",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("key", sa.String(200), nullable=False, unique=True),
        sa.Column("incident_id", sa.String(16), sa.ForeignKey("incidents.id", ondelete="CASCADE")),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE")),
        sa.Column("channel", sa.String(16), nullable=False),
        sa.Column("action", sa.String(24), nullable=False),
        sa.Column("target", sa.String(100), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", UTCDateTime(), nullable=False),
        sa.Column("last_error", sa.Text()),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("sent_at", UTCDateTime()),
    )
    op.create_index("ix_deliveries_due", "deliveries", ["state", "next_attempt_at"])
    op.create_index("ix_deliveries_incident_id", "deliveries", ["incident_id"])


def downgrade() -> None:
    op.drop_table("deliveries")
    op.drop_table("incidents")
    with op.batch_alter_table("runs") as batch:
        for column in ("restart_at", "auto_restarts", "vitals", "attempt_started_at"):
            batch.drop_column(column)
