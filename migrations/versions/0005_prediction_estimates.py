"""prediction estimates: the GPU-free answer a prediction carries while it waits for its measurement

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04 20:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('predictions', sa.Column('estimate', sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    op.drop_column('predictions', 'estimate')
