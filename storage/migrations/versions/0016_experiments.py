"""experiments: the ``experiments`` table (a job, a search space, an objective, seeds, search, pruner, limits and a
budget; its thread), ``experiment_trials`` (each trial's Optuna number, parameters, status and the run of each seed)
and ``runs.experiment_id`` (the experiment a run is a trial of; indexed). Optuna keeps its study in its own tables of
the same database, created when the first experiment is (``labbot.training.experiments.study``).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

from labbot.storage.models import UTCDateTime

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

BIGINT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("owner", sa.String(100), nullable=False),
        sa.Column("job", sa.String(100), nullable=False),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("study_name", sa.String(200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("ended_at", UTCDateTime(), nullable=True),
        sa.Column("channel", sa.String(64), nullable=True),
        sa.Column("thread_ts", sa.String(32), nullable=True),
        sa.Column("card_digest", sa.String(64), nullable=True),
        sa.Column("summary_posted", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_experiments_status", "experiments", ["status"])
    op.create_table(
        "experiment_trials",
        sa.Column(
            "experiment_id",
            sa.String(32),
            sa.ForeignKey("experiments.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("number", sa.Integer(), primary_key=True),
        sa.Column("optuna_trial_id", BIGINT, nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("run_ids", sa.JSON(), nullable=False),
        sa.Column("reported_step", BIGINT, nullable=True),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("seed_values", sa.JSON(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("ended_at", UTCDateTime(), nullable=True),
    )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("experiment_id", sa.String(32), nullable=True))
    op.create_index("ix_runs_experiment_id", "runs", ["experiment_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_experiment_id", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("experiment_id")
    op.drop_table("experiment_trials")
    op.drop_index("ix_experiments_status", table_name="experiments")
    op.drop_table("experiments")
