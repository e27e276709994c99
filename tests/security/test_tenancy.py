"""Predictions have owners: reads need a key, a key sees its own history (an admin key everything), the shared result
cache stays shared, and /v1/hosts shows a worker's internals to admins only."""

from __future__ import annotations

from sqlalchemy.orm import Session

from tests.service.helpers import run_queued_jobs
from ledger.models import Host, Population, utcnow

from .helpers import body

CONFIDENTIAL = {"name": "CONFIDENTIAL prototype", "sm_count": 40, "boost_clock_mhz": 1800,
                "memory_bandwidth_gbps": 500, "memory_size_gb": 16}


def test_reads_need_a_key(client, configure):
    for path in ("/v1/predictions", "/v1/predictions?q=CONFIDENTIAL", "/v1/hosts", "/v1/populations",
                 "/v1/targets"):
        assert client.get(path).status_code == 401, path


def test_a_key_sees_only_its_own_history(client, keys, configure):
    mine = client.post("/v1/predictions", json=body([CONFIDENTIAL]), headers=keys.a).json()["data"][0]["id"]

    theirs = client.get("/v1/predictions?q=CONFIDENTIAL", headers=keys.b).json()
    own = client.get("/v1/predictions?q=CONFIDENTIAL", headers=keys.a).json()
    everything = client.get("/v1/predictions?q=CONFIDENTIAL", headers=keys.admin).json()

    assert theirs == {"data": [], "count": 0}
    assert [item["id"] for item in own["data"]] == [mine]
    assert [item["id"] for item in everything["data"]] == [mine]
    assert client.get(f"/v1/predictions/{mine}", headers=keys.b).status_code == 404
    assert client.get(f"/v1/predictions/{mine}", headers=keys.a).status_code == 200


def test_the_result_cache_stays_shared_and_each_asker_has_the_row_in_its_history(client, redis, keys, configure):
    first = client.post("/v1/predictions", json=body(), headers=keys.a).json()["data"][0]
    run_queued_jobs(redis)

    again = client.post("/v1/predictions", json=body(), headers=keys.b)

    assert again.status_code == 200 and again.json()["cached"] is True
    assert again.json()["data"][0]["id"] == first["id"]
    assert client.get("/v1/predictions", headers=keys.b).json()["count"] == 1


def test_a_key_sees_only_its_own_populations_and_a_list_is_capped(client, keys, configure):
    created = client.post("/v1/populations", headers=keys.a, json={
        "workload": body()["workload"], "devices": [{"target": "t4", "count": 3}], "estimator": "analytic"})
    assert created.status_code == 202, created.text
    population = created.json()["id"]

    assert client.get(f"/v1/populations/{population}", headers=keys.b).status_code == 404
    assert client.get(f"/v1/populations/{population}/rounds", headers=keys.b).status_code == 404
    assert client.get(f"/v1/populations/{population}/trace", headers=keys.b).status_code == 404
    assert client.get("/v1/populations", headers=keys.b).json()["count"] == 0
    assert client.get("/v1/populations", headers=keys.a).json()["count"] == 1
    assert client.get("/v1/populations?limit=500", headers=keys.a).status_code == 422


def test_listing_populations_only_reads(client, redis, db, keys, configure):
    created = client.post("/v1/populations", headers=keys.a, json={
        "workload": body()["workload"], "devices": [{"target": "t4", "count": 3}], "estimator": "analytic"})
    run_queued_jobs(redis)

    client.get("/v1/populations", headers=keys.a)

    with Session(db) as session:
        assert session.get(Population, created.json()["id"]).status == "queued"  # a list wrote nothing
    assert client.get(f"/v1/populations/{created.json()['id']}", headers=keys.a).json()["status"] == "done"


def test_a_workers_pid_lock_and_token_are_for_admins_only(client, db, keys, configure):
    with Session(db) as session:
        session.add(Host(id="box:gpu0", host_class="cpu", fingerprint="cpu", last_heartbeat=utcnow(),
                         info={"queues": ["cpu"], "lock_token": "us-box:gpu0-77-abcdef", "pid": 77,
                               "lock": "understudy:lock:box:gpu0", "gpu_name": None}))
        session.commit()

    public = client.get("/v1/hosts", headers=keys.a).json()["data"][0]["info"]
    admin = client.get("/v1/hosts", headers=keys.admin).json()["data"][0]["info"]

    assert not {"pid", "lock", "lock_token"} & set(public)
    assert {"pid", "lock", "lock_token"} <= set(admin)


def test_only_an_admin_key_manages_keys(client, keys, configure):
    assert client.get("/v1/keys", headers=keys.a).status_code == 403
    made = client.post("/v1/keys", json={"name": "ci"}, headers=keys.admin)
    assert made.status_code == 201 and made.json()["token"].startswith("us_")
    assert client.get("/v1/predictions", headers={"X-API-Key": made.json()["token"]}).status_code == 200
    listed = client.get("/v1/keys", headers=keys.admin).json()
    assert listed["count"] == 4 and all("token" not in item for item in listed["data"])
