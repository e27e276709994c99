"""Request bodies over UNDERSTUDY_MAX_BODY_BYTES get 413, declared or chunked; writes past a rate limit (per API key,
per client address) get 429 with Retry-After. Both answer before the request reaches a route or the queue."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ledger.models import Prediction

WORKLOAD = {"model": "resnet18", "mode": "infer", "batch_size": 8, "resolution": 64, "precision": "fp32"}


def body(batch_size: int = 8) -> dict[str, Any]:
    return {"workload": {**WORKLOAD, "batch_size": batch_size}, "targets": ["t4"], "estimator": "analytic"}


@pytest.fixture
def limits(app: Any, settings: Any) -> Any:
    """Set limits for one test: limits(rate_limit_per_key=3, ...)."""
    from app.core.config import get_settings

    def apply(**values: Any) -> None:
        app.dependency_overrides[get_settings] = lambda: settings.model_copy(update=values)

    return apply


# Body size -------------------------------------------------------------------------------------------------------


def test_a_declared_body_over_the_limit_is_413_before_it_is_read(client, auth, limits, nothing_queued):
    limits(max_body_bytes=1000)
    padded = body() | {"host": "h" * 2000}

    answer = client.post("/v1/predictions", json=padded, headers=auth)

    assert answer.status_code == 413
    assert answer.json() == {"detail": "the body is larger than 1000 bytes (UNDERSTUDY_MAX_BODY_BYTES)"}
    nothing_queued()


def chunks(total: int, size: int = 1024) -> Iterator[bytes]:
    sent = 0
    yield b'{"workload": {"model": "resnet18"}, "targets": ["t4"], "host": "'
    while sent < total:
        yield b"h" * size
        sent += size
    yield b'"}'


def test_a_chunked_body_without_a_length_is_413_once_it_passes_the_limit(client, auth, limits, nothing_queued):
    limits(max_body_bytes=4096)

    answer = client.post("/v1/predictions", content=chunks(1_000_000), headers=auth | {
        "Content-Type": "application/json"})

    assert answer.request.headers.get("transfer-encoding") == "chunked"
    assert answer.status_code == 413
    assert "UNDERSTUDY_MAX_BODY_BYTES" in answer.json()["detail"]
    nothing_queued()


def test_a_chunked_body_under_the_limit_is_served(client, auth):
    import json

    def small() -> Iterator[bytes]:
        text = json.dumps(body()).encode()
        yield text[:10]
        yield text[10:]

    answer = client.post("/v1/predictions", content=small(), headers=auth | {"Content-Type": "application/json"})

    assert answer.request.headers.get("transfer-encoding") == "chunked"
    assert answer.status_code == 202, answer.text


def test_a_content_length_that_is_not_a_number_is_413(client, auth, nothing_queued):
    answer = client.post("/v1/predictions", content=b"{}", headers=auth | {"Content-Length": "-5",
                                                                          "Content-Type": "application/json"})

    assert answer.status_code == 413  # (a real server refuses it as malformed, 400, before the app sees it)
    nothing_queued()


# Rate limits -----------------------------------------------------------------------------------------------------


def test_writes_past_the_per_key_limit_are_429_with_retry_after(client, auth, db, limits):
    limits(rate_limit_per_key=3, rate_limit_per_ip=0, rate_limit_window_s=30)

    answers = [client.post("/v1/predictions", json=body(size), headers=auth) for size in range(1, 6)]

    assert [a.status_code for a in answers] == [202, 202, 202, 429, 429]
    refused = answers[3]
    assert 1 <= int(refused.headers["Retry-After"]) <= 30
    assert refused.json()["detail"].startswith("too many writes from this API key: at most 3 per 30 s")
    with Session(db) as session:  # the refused requests wrote and queued nothing
        assert session.scalar(select(func.count()).select_from(Prediction)) == 3


def test_another_key_has_its_own_allowance(client, auth, db, limits):
    from sqlalchemy.orm import Session

    from app.security import create_api_key

    limits(rate_limit_per_key=1, rate_limit_per_ip=0)
    with Session(db) as session:
        _, other = create_api_key(session=session, name="other")

    assert client.post("/v1/predictions", json=body(1), headers=auth).status_code == 202
    assert client.post("/v1/predictions", json=body(2), headers=auth).status_code == 429
    assert client.post("/v1/predictions", json=body(3), headers={"X-API-Key": other}).status_code == 202


def test_writes_past_the_per_address_limit_are_429_whatever_key_they_carry(client, auth, limits, nothing_queued):
    limits(rate_limit_per_key=0, rate_limit_per_ip=2)

    answers = [client.post("/v1/predictions", json=body(), headers={"X-API-Key": f"us_made_up_{i}"})
               for i in range(4)]

    # Unknown keys still count against the address: rotating made-up keys gains nothing.
    assert [a.status_code for a in answers] == [401, 401, 429, 429]
    assert "this address" in answers[2].json()["detail"]
    nothing_queued()


def test_reads_are_not_rate_limited(client, limits):
    limits(rate_limit_per_key=1, rate_limit_per_ip=1)

    assert {client.get("/v1/targets").status_code for _ in range(5)} == {200}


def test_a_new_window_allows_writes_again(client, auth, limits):
    limits(rate_limit_per_key=1, rate_limit_per_ip=0, rate_limit_window_s=0.5)

    assert client.post("/v1/predictions", json=body(1), headers=auth).status_code == 202
    assert client.post("/v1/predictions", json=body(2), headers=auth).status_code == 429
    time.sleep(0.6)
    assert client.post("/v1/predictions", json=body(3), headers=auth).status_code == 202


def test_redis_holds_no_api_key_in_clear(client, auth, redis, api_key, limits):
    limits(rate_limit_per_key=10, rate_limit_per_ip=10)

    client.post("/v1/predictions", json=body(), headers=auth)

    keys = [key.decode() for key in redis.keys("understudy:rate:*")]
    assert len(keys) == 2
    assert not any(api_key in key or api_key[3:20] in key for key in keys)


def test_without_redis_the_limits_let_writes_through_to_their_own_503(client, auth, limits):
    limits(rate_limit_per_key=1, rate_limit_per_ip=1, redis_url="redis://127.0.0.1:1/0")

    answers = [client.post("/v1/predictions", json=body(), headers=auth) for _ in range(3)]

    assert {a.status_code for a in answers} == {503}  # the queue is down, not a rate limit
    assert "Redis" in answers[0].json()["detail"]


# A process takes a limit's requests from Redis in batches (app.limits.batch_of) ------------------------------------


def scope(token: bytes) -> dict[str, Any]:
    return {"type": "http", "headers": [(b"x-api-key", token)], "client": ("10.0.0.1", 1234)}


def test_one_redis_round_trip_serves_a_batch_of_requests(settings, redis):
    from app.limits import RateLimit, batch_of

    limited = settings.model_copy(update={"rate_limit_per_key": 100_000, "rate_limit_per_ip": 0})
    limiter = RateLimit(app=None)  # type: ignore[arg-type]
    batch = batch_of(100_000)

    async def ask(times: int) -> list[Any]:
        return [await limiter.check(scope(b"us_key"), limited) for _ in range(times)]

    import asyncio

    assert asyncio.run(ask(batch)) == [None] * batch
    [counter] = redis.keys("understudy:rate:writes:key:*")
    assert int(redis.get(counter)) == batch  # taken once, spent one by one
    asyncio.run(ask(1))
    assert int(redis.get(counter)) == 2 * batch


def test_processes_taking_batches_never_admit_more_than_the_limit(settings, redis):
    import asyncio

    from app.limits import RateLimit, batch_of

    limit = 500
    limited = settings.model_copy(update={"rate_limit_per_key": limit, "rate_limit_per_ip": 0})
    processes = [RateLimit(app=None), RateLimit(app=None), RateLimit(app=None)]  # type: ignore[arg-type]
    assert batch_of(limit) > 1

    async def ask() -> list[bool]:
        # Turn by turn, and one process asking only now and then: its unspent batch is counted all the same.
        asked = [processes[i % 2] if i % 50 else processes[2] for i in range(limit + 100)]
        return [await process.check(scope(b"us_key"), limited) is None for process in asked]

    admitted = asyncio.run(ask())

    # Never more than the limit; fewer by less than one batch for each process holding part of one.
    assert limit - len(processes) * batch_of(limit) < sum(admitted) <= limit
