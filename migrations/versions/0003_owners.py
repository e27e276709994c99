"""owners: API key scopes (admin), which keys asked for which predictions, owner indexes on populations and
calibrations

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 00:20:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('api_keys', sa.Column('admin', sa.Boolean(), nullable=False, server_default=sa.false()))
    # A prediction row is shared by everyone who asks the same thing (the result cache); who asked is kept here.
    op.create_table('prediction_owners',
    sa.Column('prediction_id', sa.String(length=32), nullable=False),
    sa.Column('owner_id', sa.String(length=32), nullable=False),
    sa.Column('request_id', sa.String(length=32), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['prediction_id'], ['predictions.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['owner_id'], ['api_keys.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('prediction_id', 'owner_id')
    )
    op.create_index(op.f('ix_prediction_owners_owner_id'), 'prediction_owners', ['owner_id'], unique=False)
    op.create_index(op.f('ix_prediction_owners_request_id'), 'prediction_owners', ['request_id'], unique=False)
    op.create_index(op.f('ix_populations_created_by'), 'populations', ['created_by'], unique=False)
    op.create_index(op.f('ix_calibrations_created_by'), 'calibrations', ['created_by'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_calibrations_created_by'), table_name='calibrations')
    op.drop_index(op.f('ix_populations_created_by'), table_name='populations')
    op.drop_index(op.f('ix_prediction_owners_request_id'), table_name='prediction_owners')
    op.drop_index(op.f('ix_prediction_owners_owner_id'), table_name='prediction_owners')
    op.drop_table('prediction_owners')
    op.drop_column('api_keys', 'admin')
