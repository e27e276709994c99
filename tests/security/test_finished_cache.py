"""Each API process remembers the finished predictions it has served and who owns them (app.finished), so that a
cache hit asked again costs no query (benchmarks/load/REPORT.md). What it remembers never shows a key a row outside
its history, never skips putting a row in a new asker's history, and never holds an answer that can still change."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event, text

from app import auth
from app.finished import FinishedPredictions
from app.schemas import PredictionPublic
from tests.service.helpers import run_queued_jobs

from .helpers import body


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    """The SQL statements sent through this engine inside the block."""
    sent: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def finished_prediction(client: Any, redis: Any, headers: dict[str, str]) -> str:
    """A done prediction in this key's history, served once (and so remembered) by GET and by POST."""
    prediction_id = client.post("/v1/predictions", json=body(), headers=headers).json()["data"][0]["id"]
    run_queued_jobs(redis)
    assert client.get(f"/v1/predictions/{prediction_id}", headers=headers).json()["status"] == "done"
    assert client.post("/v1/predictions", json=body(), headers=headers).status_code == 200
    return prediction_id


def test_a_remembered_cache_hit_is_answered_without_a_query(client, db, redis, keys, configure, monkeypatch):
    monkeypatch.setattr(auth, "CACHE_S", 3600.0)  # the key's own lookup is not what this is about
    prediction_id = finished_prediction(client, redis, keys.a)

    with statements(db) as sent:
        read = client.get(f"/v1/predictions/{prediction_id}", headers=keys.a)
        posted = client.post("/v1/predictions", json=body(), headers=keys.a)

    assert read.status_code == 200 and read.json()["status"] == "done" and read.json()["cached"] is False
    assert posted.status_code == 200 and posted.json()["cached"] is True
    assert posted.json()["data"][0] == {**read.json(), "cached": True}
    assert posted.json()["request_id"] != read.json()["request_id"]  # a request of its own
    assert sent == []


def test_a_remembered_row_is_not_shown_to_a_key_that_does_not_own_it(client, redis, keys, configure):
    prediction_id = finished_prediction(client, redis, keys.a)

    assert client.get(f"/v1/predictions/{prediction_id}", headers=keys.b).status_code == 404
    assert client.get(f"/v1/predictions/{prediction_id}", headers=keys.admin).status_code == 200


def test_a_remembered_row_asked_for_by_another_key_enters_its_history(client, redis, keys, configure):
    prediction_id = finished_prediction(client, redis, keys.a)

    again = client.post("/v1/predictions", json=body(), headers=keys.b)

    assert again.status_code == 200 and again.json()["data"][0]["id"] == prediction_id
    assert client.get(f"/v1/predictions/{prediction_id}", headers=keys.b).status_code == 200
    assert client.get("/v1/predictions", headers=keys.b).json()["count"] == 1


def test_a_prediction_that_is_not_finished_is_read_again_until_it_is(client, redis, keys, configure):
    prediction_id = client.post("/v1/predictions", json=body(), headers=keys.a).json()["data"][0]["id"]
    assert client.get(f"/v1/predictions/{prediction_id}", headers=keys.a).json()["status"] == "queued"

    run_queued_jobs(redis)

    assert client.get(f"/v1/predictions/{prediction_id}", headers=keys.a).json()["status"] == "done"


def public(prediction_id: str, status: str = "done") -> PredictionPublic:
    return PredictionPublic.model_validate({
        "id": prediction_id, "status": status, "model": "resnet18", "workload": {}, "target_id": "t4",
        "estimator": "analytic", "estimator_version": "1", "host": {"host_class": "cpu"},
        "created_at": "2026-01-01T00:00:00Z"})


def test_a_row_deleted_behind_the_apis_back_is_not_shown_once_memory_is_not_trusted(client, db, redis, keys,
                                                                                      configure):
    prediction_id = finished_prediction(client, redis, keys.a)
    with db.begin() as connection:  # what an operator's DELETE (or a test emptying its tables) does
        connection.execute(text("TRUNCATE predictions CASCADE"))

    configure(remember_finished_s=0)

    assert client.get(f"/v1/predictions/{prediction_id}", headers=keys.a).status_code == 404


def test_what_a_process_remembers_expires():
    remembered = FinishedPredictions()
    remembered.remember(public("p1"), "key-1", "owner")

    assert remembered.get("p1", "owner", max_age_s=0.2) == public("p1")
    time.sleep(0.25)
    assert remembered.get("p1", "owner", max_age_s=0.2) is None
    assert remembered.by_keys(["key-1"], None, max_age_s=0.2) is None


def test_what_a_process_remembers_is_bounded():
    remembered = FinishedPredictions(max_rows=2, max_owned=100)
    remembered.remember(public("p1"), "key-1", "owner")
    remembered.remember(public("p2"), "key-2", "owner")

    remembered.remember(public("p3"), "key-3", "owner")  # over the bound: the rest is forgotten

    assert remembered.get("p1", "owner", 60) is None and remembered.by_keys(["key-2"], "owner", 60) is None
    assert remembered.get("p3", "owner", 60) == public("p3")


def test_only_final_cached_answers_are_remembered():
    remembered = FinishedPredictions()
    for status in ("queued", "running", "failed"):
        remembered.remember(public(status, status), f"key-{status}", None)
    remembered.remember(public("oom", "oom"), "key-oom", None)

    assert [remembered.get(status, None, 60) for status in ("queued", "running", "failed")] == [None, None, None]
    assert remembered.by_keys(["key-oom"], None, 60) == [public("oom", "oom")]
