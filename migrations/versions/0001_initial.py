"""initial schema: predictions ledger, api keys, hosts, calibrations

Revision ID: 0001
Revises:
Create Date: 2026-11-29 19:11:51.759890
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('api_keys',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False),
    sa.Column('key_hash', sa.String(length=128), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('key_hash')
    )
    op.create_index(op.f('ix_api_keys_prefix'), 'api_keys', ['prefix'], unique=False)
    op.create_table('hosts',
    sa.Column('id', sa.String(length=120), nullable=False),
    sa.Column('host_class', sa.String(length=80), nullable=False),
    sa.Column('gpu_name', sa.String(length=120), nullable=True),
    sa.Column('fingerprint', sa.String(length=80), nullable=False),
    sa.Column('info', sa.JSON(), nullable=False),
    sa.Column('last_heartbeat', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_hosts_host_class'), 'hosts', ['host_class'], unique=False)
    op.create_table('predictions',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('cache_key', sa.String(length=64), nullable=False),
    sa.Column('request_id', sa.String(length=32), nullable=True),
    sa.Column('workload_digest', sa.String(length=64), nullable=False),
    sa.Column('workload', sa.JSON(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('target_id', sa.String(length=80), nullable=False),
    sa.Column('target', sa.JSON(), nullable=False),
    sa.Column('estimator', sa.String(length=40), nullable=False),
    sa.Column('estimator_version', sa.String(length=20), nullable=False),
    sa.Column('host_class', sa.String(length=80), nullable=False),
    sa.Column('host_fingerprint', sa.String(length=80), nullable=True),
    sa.Column('host_name', sa.String(length=120), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('latency_ms', sa.Float(), nullable=True),
    sa.Column('median_ms', sa.Float(), nullable=True),
    sa.Column('spread_ms', sa.Float(), nullable=True),
    sa.Column('samples_per_s', sa.Float(), nullable=True),
    sa.Column('host_setting', sa.JSON(), nullable=True),
    sa.Column('timing_mode', sa.String(length=16), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('details', sa.JSON(), nullable=True),
    sa.Column('job_id', sa.String(length=64), nullable=True),
    sa.Column('worker_id', sa.String(length=200), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('queued_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('cache_key')
    )
    op.create_index(op.f('ix_predictions_created_at'), 'predictions', ['created_at'], unique=False)
    op.create_index(op.f('ix_predictions_estimator'), 'predictions', ['estimator'], unique=False)
    op.create_index(op.f('ix_predictions_host_class'), 'predictions', ['host_class'], unique=False)
    op.create_index(op.f('ix_predictions_model'), 'predictions', ['model'], unique=False)
    op.create_index(op.f('ix_predictions_request_id'), 'predictions', ['request_id'], unique=False)
    op.create_index(op.f('ix_predictions_status'), 'predictions', ['status'], unique=False)
    op.create_index('ix_predictions_status_created', 'predictions', ['status', 'created_at'], unique=False)
    op.create_index(op.f('ix_predictions_target_id'), 'predictions', ['target_id'], unique=False)
    op.create_index(op.f('ix_predictions_workload_digest'), 'predictions', ['workload_digest'], unique=False)
    op.create_table('calibrations',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('target_id', sa.String(length=80), nullable=False),
    sa.Column('base_estimator', sa.String(length=40), nullable=False),
    sa.Column('points', sa.JSON(), nullable=False),
    sa.Column('parameters', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.String(length=32), nullable=True),
    sa.ForeignKeyConstraint(['created_by'], ['api_keys.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_calibrations_target_id'), 'calibrations', ['target_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_calibrations_target_id'), table_name='calibrations')
    op.drop_table('calibrations')
    op.drop_index(op.f('ix_predictions_workload_digest'), table_name='predictions')
    op.drop_index(op.f('ix_predictions_target_id'), table_name='predictions')
    op.drop_index('ix_predictions_status_created', table_name='predictions')
    op.drop_index(op.f('ix_predictions_status'), table_name='predictions')
    op.drop_index(op.f('ix_predictions_request_id'), table_name='predictions')
    op.drop_index(op.f('ix_predictions_model'), table_name='predictions')
    op.drop_index(op.f('ix_predictions_host_class'), table_name='predictions')
    op.drop_index(op.f('ix_predictions_estimator'), table_name='predictions')
    op.drop_index(op.f('ix_predictions_created_at'), table_name='predictions')
    op.drop_table('predictions')
    op.drop_index(op.f('ix_hosts_host_class'), table_name='hosts')
    op.drop_table('hosts')
    op.drop_index(op.f('ix_api_keys_prefix'), table_name='api_keys')
    op.drop_table('api_keys')
