"""The catalog, the workers' hosts, liveness and readiness; a 503 (never a traceback) when a backend is down."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from understudy.catalog import catalog
from ledger.db import get_engine
from ledger.dispatch import rq_queue
from ledger.models import Host, utcnow

from .helpers import predict_body, queued_job_count


def register_host(db, host_id: str = "gpubox:gpu0", fingerprint: str = "f00dfeedf00dfeed", age_s: float = 0.0,
                  estimators: dict | None = None) -> None:
    info = {"gpu_name": "NVIDIA H200", "queues": [f"gpu:{fingerprint}", "cpu"],
            "estimators": estimators or {"hostaware": {"version": "1", "needs_gpu": True},
                                         "spec": {"version": "1+mps+emulated", "needs_gpu": True},
                                         "analytic": {"version": "1", "needs_gpu": False}}}
    with Session(db) as session:
        session.add(Host(id=host_id, host_class=f"gpu:{fingerprint}", gpu_name="NVIDIA H200", fingerprint=fingerprint,
                         info=info, last_heartbeat=utcnow() - timedelta(seconds=age_s)))
        session.commit()


def test_the_catalog_lists_every_target(client):
    body = client.get("/v1/targets").json()

    assert body["count"] == len(catalog()) == len(body["data"])
    assert {"id", "name", "sm_count", "boost_clock_mhz", "memory_bandwidth_gbps", "source"} <= set(body["data"][0])


def test_a_target_is_found_by_id_or_by_name(client):
    assert client.get("/v1/targets/rtx-3090").json()["sm_count"] == 82
    assert client.get("/v1/targets/RTX 3090").json()["id"] == "rtx-3090"


def test_a_power_limit_on_a_catalog_gpu_shows_the_clock_it_holds_at_that_limit(client):
    body = client.get("/v1/targets/rtx4090@300w").json()

    assert (body["id"], body["tdp_w"], body["sustained_clock_mhz"]) == ("rtx-4090@300w", 300, 2145.2)


def test_an_unknown_target_is_404(client):
    answer = client.get("/v1/targets/voodoo-5")

    assert answer.status_code == 404
    assert "unknown target" in answer.json()["detail"]


def test_hosts_show_gpu_fingerprint_heartbeat_and_queue_depth(client, db, auth, redis):
    register_host(db)
    client.post("/v1/predictions", json=predict_body() | {"estimator": "hostaware"}, headers=auth)

    hosts = client.get("/v1/hosts").json()

    assert hosts["count"] == 1
    host = hosts["data"][0]
    assert (host["id"], host["gpu_name"], host["fingerprint"]) == ("gpubox:gpu0", "NVIDIA H200", "f00dfeedf00dfeed")
    assert host["alive"] is True and host["last_heartbeat"]
    assert host["queue_depth"] == 1
    assert host["queues"] == {"gpu:f00dfeedf00dfeed": 1, "cpu": 1}  # the measurement, and its GPU-free estimate


def test_a_host_without_a_recent_heartbeat_is_shown_as_not_alive(client, db):
    register_host(db, age_s=3600)

    assert client.get("/v1/hosts").json()["data"][0]["alive"] is False


def test_healthz_answers_while_the_process_runs(client):
    assert client.get("/healthz").json() == {"status": "ok", "checks": {}}


def test_readyz_is_ok_when_database_and_redis_answer(client):
    answer = client.get("/readyz")

    assert answer.status_code == 200
    assert answer.json()["checks"] == {"database": "ok", "redis": "ok"}


def test_readyz_is_503_naming_redis_when_redis_is_down(client, app):
    from app.api.deps import get_redis
    from app.core.db import redis_for

    app.dependency_overrides[get_redis] = lambda: redis_for("redis://127.0.0.1:1/0")

    answer = client.get("/readyz")

    assert answer.status_code == 503
    assert answer.json()["checks"]["database"] == "ok"
    assert answer.json()["checks"]["redis"].startswith("unavailable")


def test_a_post_is_503_without_a_traceback_when_redis_is_down(client, app, auth, db):
    from app.api.deps import get_redis
    from app.core.db import redis_for

    app.dependency_overrides[get_redis] = lambda: redis_for("redis://127.0.0.1:1/0")

    answer = client.post("/v1/predictions", json=predict_body(), headers=auth)

    assert answer.status_code == 503
    assert answer.json() == {"detail": "the job queue (Redis) is unavailable; try again shortly"}


def test_requests_are_503_when_the_database_is_down(client, app):
    from sqlalchemy.orm import Session as OrmSession

    from app.api.deps import get_db

    down = get_engine("postgresql+psycopg://root@127.0.0.1:1/nowhere")

    def unreachable():
        with OrmSession(down) as session:
            yield session

    app.dependency_overrides[get_db] = unreachable

    for path in ("/v1/predictions", "/v1/hosts", "/readyz"):
        answer = client.get(path)
        assert answer.status_code == 503, path
        assert "Traceback" not in answer.text


def test_a_gpu_estimator_with_no_gpu_worker_registered_is_409(client, auth, redis):
    answer = client.post("/v1/predictions", json=predict_body() | {"estimator": "hostaware"}, headers=auth)

    assert answer.status_code == 409
    assert "no GPU worker is registered" in answer.json()["detail"]
    assert queued_job_count(redis) == 0


def test_a_gpu_worker_whose_heartbeat_stopped_does_not_count_as_registered(client, auth, db):
    register_host(db, age_s=3600)

    answer = client.post("/v1/predictions", json=predict_body() | {"estimator": "spec"}, headers=auth)

    assert answer.status_code == 409


def test_a_gpu_estimator_goes_to_the_registered_gpu_hosts_queue_with_its_version(client, auth, db, redis):
    register_host(db)

    answer = client.post("/v1/predictions", json=predict_body() | {"estimator": "spec"}, headers=auth)

    assert answer.status_code == 202
    item = answer.json()["data"][0]
    assert item["host"]["host_class"] == "gpu:f00dfeedf00dfeed"
    assert item["estimator_version"] == "1+mps+emulated"  # as the host advertised it
    assert queued_job_count(redis, "gpu:f00dfeedf00dfeed") == 1
    assert [job.func_name for job in rq_queue(redis, "cpu").get_jobs()] == ["worker.tasks.estimate_predictions"]


def test_without_an_estimator_a_registered_gpu_host_gets_hostaware(client, auth, db):
    register_host(db)
    body = predict_body()
    del body["estimator"]

    assert client.post("/v1/predictions", json=body, headers=auth).json()["data"][0]["estimator"] == "hostaware"


def test_without_an_estimator_and_without_gpu_hosts_the_analytic_estimator_is_used(client, auth):
    body = predict_body()
    del body["estimator"]

    assert client.post("/v1/predictions", json=body, headers=auth).json()["data"][0]["estimator"] == "analytic"


def test_an_explicit_host_picks_among_several_gpu_hosts(client, auth, db, redis):
    register_host(db, "box-a:gpu0", "aaaaaaaaaaaaaaaa")
    register_host(db, "box-b:gpu0", "bbbbbbbbbbbbbbbb")

    answer = client.post("/v1/predictions", json=predict_body() | {"estimator": "hostaware", "host": "box-b:gpu0"},
                         headers=auth)

    assert answer.json()["data"][0]["host"]["host_class"] == "gpu:bbbbbbbbbbbbbbbb"


def test_an_explicit_host_nobody_registered_is_409(client, auth, db):
    register_host(db)

    answer = client.post("/v1/predictions", json=predict_body() | {"estimator": "hostaware", "host": "elsewhere"},
                         headers=auth)

    assert answer.status_code == 409
    assert "no worker has registered host 'elsewhere'" in answer.json()["detail"]


def test_a_cpu_estimator_gives_the_same_cache_entry_whatever_host_is_named(client, auth, db, redis):
    register_host(db)
    first = client.post("/v1/predictions", json=predict_body(), headers=auth).json()

    again = client.post("/v1/predictions", json=predict_body() | {"host": "gpubox:gpu0"}, headers=auth).json()

    assert again["data"][0]["id"] == first["data"][0]["id"]
    assert again["data"][0]["host"]["host_class"] == "cpu"


def test_the_openapi_schema_has_examples(client):
    spec = client.get("/openapi.json").json()

    schemas = spec["components"]["schemas"]
    assert schemas["PredictionCreate"]["examples"]
    assert schemas["PredictionPublic"]["examples"]
    assert spec["paths"]["/v1/predictions"]["post"]["responses"]["422"]
