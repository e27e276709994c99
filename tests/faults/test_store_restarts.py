"""Redis and PostgreSQL (the fault tests' own, tests/faults/stores.py) restarted under the real API and worker
(subprocesses) with requests in flight.

Nothing the API accepted (200 or 202, with prediction ids) is lost: every accepted prediction is done in the end.
While a store is down the API answers 503 (JSON, Retry-After) and never 500; it recovers by itself. Jobs are real
analytic predictions, a few seconds each on this machine, so each test keeps to a handful of distinct workloads.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from .helpers import (FAST_RECONCILE, SLOWJOB, api_server, postgres_stopped, restart_redis, start_worker, status_of,
                      wait_for)


def body(batch_size: int, targets: list[str] | None = None) -> dict[str, Any]:
    return {"workload": {"model": "resnet18", "mode": "infer", "batch_size": batch_size, "resolution": 64,
                         "precision": "fp32"}, "targets": targets or ["t4", "l4"], "estimator": "analytic"}


class Load:
    """Threads that POST the given bodies in turn until stopped, keeping every answer."""

    def __init__(self, url: str, key: str, bodies: list[dict[str, Any]], threads: int = 3) -> None:
        self.url, self.key, self.bodies = url, key, bodies
        self.answers: list[tuple[float, int, dict[str, Any]]] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]

    def _run(self, offset: int) -> None:
        with httpx.Client(base_url=self.url, headers={"X-API-Key": self.key}, timeout=15) as client:
            i = offset
            while not self.stopping.is_set():
                try:
                    answer = client.post("/v1/predictions", json=self.bodies[i % len(self.bodies)])
                    self.answers.append((time.monotonic(), answer.status_code, answer.json()))
                except httpx.HTTPError as exc:
                    self.errors.append(repr(exc))
                i += 1
                time.sleep(0.05)

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def accepted(self, since: float = 0.0) -> set[str]:
        return {item["id"] for at, status, answer in self.answers if status in (200, 202) and at >= since
                for item in answer["data"]}

    def statuses(self) -> set[int]:
        return {status for _, status, _ in self.answers}


def test_requests_in_flight_across_a_redis_restart_are_all_done_in_the_end(db, api_key, workers, stores):
    with api_server(FAST_RECONCILE) as url:
        # Each job sleeps 2 s first, so that jobs wait in Redis when it goes down.
        workers.append(start_worker(env={**FAST_RECONCILE, "UNDERSTUDY_TEST_PREDICT_DELAY_S": "2"}, paths=(SLOWJOB,)))
        with Load(url, api_key, [body(1), body(2), body(3)]) as load:
            wait_for(lambda: len(load.accepted()) == 6, 30, "the first requests to be accepted")
            restart_redis(stores)
            restarted = time.monotonic()
            load.bodies.append(body(4))  # a request first made after the restart
            wait_for(lambda: load.accepted(since=restarted + 0.5) >= load.accepted(), 30,
                     "requests to be accepted again after the restart")
        accepted = load.accepted()

        assert len(accepted) == 8
        assert load.statuses() <= {200, 202, 503}, load.statuses()
        assert not load.errors, load.errors[:3]
        wait_for(lambda: set(status_of(db, list(accepted)).values()) == {"done"}, 120,
                 "every accepted prediction to be done", poll_s=0.5)


def test_the_api_answers_503_while_postgres_is_down_and_recovers_by_itself(db, api_key, workers, stores):
    with api_server(FAST_RECONCILE) as url, httpx.Client(base_url=url, headers={"X-API-Key": api_key},
                                                         timeout=30) as client:
        workers.append(start_worker(env={**FAST_RECONCILE, "UNDERSTUDY_TEST_PREDICT_DELAY_S": "2"}, paths=(SLOWJOB,)))
        accepted = []
        for batch_size in (5, 6):
            answer = client.post("/v1/predictions", json=body(batch_size))
            assert answer.status_code == 202, answer.text
            accepted += [item["id"] for item in answer.json()["data"]]
        wait_for(lambda: "running" in status_of(db, accepted).values(), 60, "the worker to start a job")

        with postgres_stopped(stores):
            down = [client.get(f"/v1/predictions/{accepted[0]}"), client.post("/v1/predictions", json=body(7)),
                    client.get("/v1/predictions"), client.get("/readyz")]
        for answer in down:
            assert answer.status_code == 503, (answer.request.url, answer.status_code, answer.text)
            assert "Traceback" not in answer.text
        assert down[0].headers["Retry-After"] == "5"
        assert down[3].json()["checks"]["database"].startswith("unavailable")

        # Back without a restart of the API or the worker.
        wait_for(lambda: client.get("/readyz").status_code == 200, 30, "the API to be ready again")
        assert client.get(f"/v1/predictions/{accepted[0]}").status_code == 200
        after = client.post("/v1/predictions", json=body(7))
        assert after.status_code == 202, after.text
        accepted += [item["id"] for item in after.json()["data"]]
        wait_for(lambda: set(status_of(db, accepted).values()) == {"done"}, 120,
                 "every accepted prediction to be done", poll_s=0.5)
