"""the agent role "babysitter" is now "investigator": the rows that name it (sessions, turns, audit, approvals,
feedback) and its artifact stores (``RESEARCHER/babysitter``, owned or shared with) say the new name, so a thread the
babysitter answered carries on with the investigator and its files stay in its store. Data only; no schema change.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

OLD, NEW = "babysitter", "investigator"
ROLE_COLUMNS = (
    ("agent_sessions", "role"),
    ("agent_turns", "role"),
    ("tool_calls", "role"),
    ("approvals", "role"),
    ("feedback", "role"),
)
# an agent's artifact store is named RESEARCHER/ROLE (labbot.agents.fleet.identity.store_of)
STORE_COLUMNS = (("artifacts", "owner_agent"), ("artifact_shares", "shared_with"))


def _rename(old: str, new: str) -> None:
    conn = op.get_bind()
    for table, column in ROLE_COLUMNS:
        t = sa.table(table, sa.column(column, sa.String))
        conn.execute(t.update().where(t.c[column] == old).values({column: new}))
    for table, column in STORE_COLUMNS:
        t = sa.table(table, sa.column(column, sa.String))
        c = t.c[column]
        # "U0123/" of "U0123/babysitter"; "/" and the role's letters hold no LIKE wildcard
        researcher = sa.func.substr(c, 1, sa.func.length(c) - len(old), type_=sa.String)
        conn.execute(t.update().where(c.like(f"%/{old}")).values({column: researcher + new}))


def upgrade() -> None:
    _rename(OLD, NEW)


def downgrade() -> None:
    _rename(NEW, OLD)
