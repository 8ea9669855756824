"""runs, metric points, launch keys

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.floats import NanFloat
from labbot.storage.models import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("job", sa.String(100), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("owner", sa.String(100), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("ray_submission_id", sa.String(100)),
        sa.Column("telemetry_token_hash", sa.String(64), nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("stop_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime()),
        sa.Column("ended_at", UTCDateTime()),
        sa.Column("last_telemetry_at", UTCDateTime()),
        sa.Column("last_step", sa.Integer()),
        sa.Column("last_step_at", UTCDateTime()),
        sa.Column("checkpoint_step", sa.Integer()),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("channel", sa.String(64)),
        sa.Column("thread_ts", sa.String(32)),
    )
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_index("ix_runs_created_at", "runs", ["created_at"])
    op.create_table(
        "metric_points",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("value", NanFloat(), nullable=True),
        sa.Column("ts", UTCDateTime(), nullable=False),
    )
    op.create_index("ux_metric_points_point", "metric_points", ["run_id", "name", "attempt", "step"], unique=True)
    op.create_table(
        "launch_keys",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("launch_keys")
    op.drop_index("ux_metric_points_point", "metric_points")
    op.drop_table("metric_points")
    op.drop_index("ix_runs_created_at", "runs")
    op.drop_index("ix_runs_status", "runs")
    op.drop_table("runs")
