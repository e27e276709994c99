"""populations: a workload over a weighted device population (POST /v1/populations), summarised once its
predictions are final

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 19:51:22.328354
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('populations',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('request_id', sa.String(length=32), nullable=True),
    sa.Column('workload_digest', sa.String(length=64), nullable=False),
    sa.Column('workload', sa.JSON(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('estimator', sa.String(length=40), nullable=False),
    sa.Column('members', sa.JSON(), nullable=False),
    sa.Column('ks', sa.JSON(), nullable=False),
    sa.Column('slowest', sa.Integer(), nullable=False),
    sa.Column('weighting', sa.String(length=8), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('summary', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_by', sa.String(length=32), nullable=True),
    sa.ForeignKeyConstraint(['created_by'], ['api_keys.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_populations_created_at'), 'populations', ['created_at'], unique=False)
    op.create_index(op.f('ix_populations_model'), 'populations', ['model'], unique=False)
    op.create_index(op.f('ix_populations_status'), 'populations', ['status'], unique=False)
    op.create_index(op.f('ix_populations_workload_digest'), 'populations', ['workload_digest'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_populations_workload_digest'), table_name='populations')
    op.drop_index(op.f('ix_populations_status'), table_name='populations')
    op.drop_index(op.f('ix_populations_model'), table_name='populations')
    op.drop_index(op.f('ix_populations_created_at'), table_name='populations')
    op.drop_table('populations')
