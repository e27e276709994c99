"""population measurements: the step times a population's request gives, and the calibrations made from them

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 19:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('populations', sa.Column('measurements', sa.JSON(), nullable=True))
    # A calibration a population's measurements made is that population's alone: never a key's latest.
    op.add_column('calibrations', sa.Column('population_id', sa.String(length=32), nullable=True))
    op.create_index(op.f('ix_calibrations_population_id'), 'calibrations', ['population_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_calibrations_population_id'), table_name='calibrations')
    op.drop_column('calibrations', 'population_id')
    op.drop_column('populations', 'measurements')
