"""ledger.predictions.record_estimate: a row waiting for its measurement carries a GPU-free estimate, which its final
result never erases and which can never overwrite a final row."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from ledger import predictions
from ledger.models import Prediction, utcnow
from understudy.catalog import catalog
from understudy.keys import cache_identity, cache_key
from understudy.results import PredictionResult, Status
from understudy.workload import Workload

from .helpers import WORKLOAD


def queued_row(db: Engine) -> str:
    """A hostaware row queued for a measurement, as the API inserts it."""
    workload, target = Workload.model_validate(WORKLOAD), catalog().get("rtx-3090")
    identity = cache_identity("hostaware", "1", "f00dfeedf00dfeed")
    row = predictions.new_row(cache_key=cache_key(workload, target, identity), workload=workload, target=target,
                              estimator="hostaware", version="1", host_class="gpu:f00dfeedf00dfeed")
    with Session(db) as session:
        [row_id] = predictions.insert_queued(session, [row], job_id="pred-test", now=utcnow())
        session.commit()
    return row_id


def result(estimator: str, latency_ms: float | None, status: Status = Status.done, **extra: Any) -> PredictionResult:
    return PredictionResult(workload_digest=Workload.model_validate(WORKLOAD).digest(), target_id="rtx-3090",
                            estimator=estimator, estimator_version="14" if estimator == "analytic" else "1",
                            status=status, latency_ms=latency_ms,
                            samples_per_s=8000 / latency_ms if latency_ms else None, **extra)


def write(db: Engine, transition: Any, *args: Any) -> Any:
    with Session(db) as session:
        answer = transition(session, *args)
        session.commit()
    return answer


def read(db: Engine, row_id: str) -> Prediction:
    with Session(db) as session:
        row = session.get(Prediction, row_id)
        assert row is not None
        return row


def test_an_estimate_attaches_to_a_queued_row_without_moving_it(db):
    row_id = queued_row(db)

    assert write(db, predictions.record_estimate, row_id, result("analytic", 2.0)) is True

    row = read(db, row_id)
    assert (row.status, row.job_id, row.latency_ms) == ("queued", "pred-test", None)
    assert row.estimate is not None
    assert (row.estimate["estimator"], row.estimate["estimator_version"]) == ("analytic", "14")
    assert (row.estimate["status"], row.estimate["latency_ms"], row.estimate["samples_per_s"]) == ("done", 2.0, 4000)


def test_finish_writes_the_measured_result_and_keeps_the_estimate_beside_it(db):
    row_id = queued_row(db)
    write(db, predictions.record_estimate, row_id, result("analytic", 2.0))

    assert write(db, predictions.finish, row_id, result("hostaware", 1.5, host_fingerprint="f00dfeedf00dfeed"))

    row = read(db, row_id)
    assert (row.status, row.latency_ms) == ("done", 1.5)
    assert row.estimate is not None and row.estimate["latency_ms"] == 2.0


def test_an_estimate_arriving_after_the_final_result_changes_nothing(db):
    row_id = queued_row(db)
    write(db, predictions.finish, row_id, result("hostaware", 1.5))

    assert write(db, predictions.record_estimate, row_id, result("analytic", 2.0)) is False

    row = read(db, row_id)
    assert (row.status, row.latency_ms, row.estimate) == ("done", 1.5, None)


def test_a_failed_estimate_is_no_estimate(db):
    row_id = queued_row(db)

    assert write(db, predictions.record_estimate, row_id,
                 result("analytic", None, Status.failed, error="could not trace")) is False

    assert read(db, row_id).estimate is None


def test_an_estimate_that_the_workload_does_not_fit_is_kept_with_its_verdict(db):
    row_id = queued_row(db)

    assert write(db, predictions.record_estimate, row_id, result("analytic", None, Status.oom)) is True

    estimate = read(db, row_id).estimate
    assert estimate is not None and (estimate["status"], estimate["latency_ms"]) == ("oom", None)


def test_a_failed_row_asked_again_is_queued_with_its_estimate(db):
    row_id = queued_row(db)
    write(db, predictions.record_estimate, row_id, result("analytic", 2.0))
    write(db, predictions.finish, row_id, result("hostaware", None, Status.failed, error="the GPU went away"))
    key = read(db, row_id).cache_key

    assert write(db, lambda session: predictions.requeue_failed(session, [key], job_id="pred-again",
                                                                 request_id="r2", now=utcnow())) == [row_id]

    row = read(db, row_id)
    assert (row.status, row.error) == ("queued", None)
    assert row.estimate is not None and row.estimate["latency_ms"] == 2.0
