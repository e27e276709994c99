"""A lost row is claimed by one reconciler only: two at once could otherwise both claim it (one commits its claim, the
other looks before the first has enqueued), so one reconciler runs at a time across every process."""

from __future__ import annotations

from tests.service.helpers import queued_job_count
from ledger.dispatch import only_reconciler, reconcile

from .helpers import body


def test_a_reconciler_does_nothing_while_another_one_runs(client, redis, db, settings, keys, configure):
    client.post("/v1/predictions", json=body(["t4", "l4"]), headers=keys.a)
    redis.flushdb()

    with only_reconciler(db) as first:
        assert first
        second = reconcile(db, redis, settings, grace_s=0)
    after = reconcile(db, redis, settings, grace_s=0)

    assert not second and queued_job_count(redis) == len(after.jobs) == 1
    assert len(after.requeued) == 2
