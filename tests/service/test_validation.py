"""Bad requests get a 422 that names the field and says why; writes without a valid key get a 401."""

from __future__ import annotations

from .helpers import predict_body


def field_errors(answer) -> dict[str, str]:
    assert answer.status_code == 422, answer.text
    return {error["field"]: error["reason"] for error in answer.json()["errors"]}


def test_an_unknown_model_is_422_naming_workload_model(client, auth):
    answer = client.post("/v1/predictions", json=predict_body(model="resnet_999"), headers=auth)

    errors = field_errors(answer)
    assert "unknown timm model 'resnet_999'" in errors["workload.model"]
    assert "workload.model" in answer.json()["detail"]


def test_a_negative_batch_size_is_422_naming_workload_batch_size(client, auth):
    answer = client.post("/v1/predictions", json=predict_body(batch_size=-4), headers=auth)

    assert field_errors(answer) == {"workload.batch_size": "Input should be greater than or equal to 1"}


def test_an_unknown_target_is_422_naming_its_position(client, auth):
    answer = client.post("/v1/predictions", json=predict_body(["rtx-3090", "voodoo-5"]), headers=auth)

    errors = field_errors(answer)
    assert list(errors) == ["targets[1]"]
    assert "unknown target 'voodoo-5'" in errors["targets[1]"]


def test_an_ambiguous_target_is_422_listing_the_candidates(client, auth):
    answer = client.post("/v1/predictions", json=predict_body(["a100"]), headers=auth)

    assert "a100-sxm4-40-gb" in field_errors(answer)["targets[0]"]


def test_an_incomplete_inline_target_is_422_naming_the_missing_field(client, auth):
    answer = client.post("/v1/predictions", json=predict_body([{"name": "mine", "sm_count": 10}]), headers=auth)

    errors = field_errors(answer)
    assert errors["targets[0].boost_clock_mhz"] == "Field required"


def test_an_unknown_estimator_is_422(client, auth):
    body = {**predict_body(), "estimator": "crystal-ball"}

    answer = client.post("/v1/predictions", json=body, headers=auth)

    assert "unknown estimator 'crystal-ball'" in field_errors(answer)["estimator"]


def test_no_targets_is_422(client, auth):
    answer = client.post("/v1/predictions", json=predict_body() | {"targets": []}, headers=auth)

    assert "targets" in field_errors(answer)


def test_an_unknown_field_is_422(client, auth):
    answer = client.post("/v1/predictions", json=predict_body() | {"priority": "high"}, headers=auth)

    assert field_errors(answer) == {"priority": "Extra inputs are not permitted"}


def test_a_body_that_is_not_json_is_422(client, auth):
    answer = client.post("/v1/predictions", content=b"{not json", headers=auth | {"Content-Type": "application/json"})

    assert "body" in field_errors(answer)


def test_a_body_over_the_size_limit_is_413(client, auth):
    answer = client.post("/v1/predictions", content=b" " * (65 * 1024),
                         headers=auth | {"Content-Type": "application/json"})

    assert answer.status_code == 413
    assert "UNDERSTUDY_MAX_BODY_BYTES" in answer.json()["detail"]


def test_a_post_without_a_key_is_401(client):
    answer = client.post("/v1/predictions", json=predict_body())

    assert answer.status_code == 401
    assert "X-API-Key" in answer.json()["detail"]
    assert answer.headers["WWW-Authenticate"] == "ApiKey"


def test_a_post_with_an_unknown_key_is_401(client, api_key):
    answer = client.post("/v1/predictions", json=predict_body(), headers={"X-API-Key": api_key + "x"})

    assert answer.status_code == 401
    assert "unknown or revoked" in answer.json()["detail"]


def test_a_revoked_key_is_401(client, db, api_key):
    from sqlalchemy.orm import Session

    from app.security import PREFIX_CHARS, revoke_api_key

    with Session(db) as session:
        revoke_api_key(session=session, key_id_or_prefix=api_key[:PREFIX_CHARS])

    answer = client.post("/v1/predictions", json=predict_body(), headers={"X-API-Key": api_key})

    assert answer.status_code == 401


def test_keys_are_stored_hashed(db, api_key):
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from ledger.models import ApiKey

    with Session(db) as session:
        stored = session.scalars(select(ApiKey)).one()

    assert api_key not in (stored.key_hash, stored.prefix)
    assert len(stored.key_hash) == 64 and api_key.startswith(stored.prefix)


def test_reads_are_open_without_a_key(client):
    assert client.get("/v1/predictions").status_code == 200
    assert client.get("/v1/targets").status_code == 200


def test_reads_need_a_key_when_configured(client, app, settings, auth):
    from app.core.config import get_settings

    app.dependency_overrides[get_settings] = lambda: settings.model_copy(update={"read_requires_key": True})

    assert client.get("/v1/predictions").status_code == 401
    assert client.get("/v1/predictions", headers=auth).status_code == 200


def test_writes_are_open_when_keys_are_turned_off(client, app, settings):
    from app.core.config import get_settings

    app.dependency_overrides[get_settings] = lambda: settings.model_copy(update={"require_api_key": False})

    assert client.post("/v1/predictions", json=predict_body()).status_code == 202


def test_too_many_targets_is_422(client, app, settings, auth):
    from app.core.config import get_settings

    app.dependency_overrides[get_settings] = lambda: settings.model_copy(update={"max_targets": 2})

    answer = client.post("/v1/predictions", json=predict_body(["t4", "l4", "rtx-3090"]), headers=auth)

    assert "at most 2 targets" in field_errors(answer)["targets"]


def test_understudy_keys_create_makes_a_key_that_writes(client):
    import subprocess
    import sys

    made = subprocess.run([sys.executable, "-m", "cli.main", "keys", "create", "--name", "ci"],
                          capture_output=True, text=True, timeout=60, check=True)
    token = made.stdout.strip()

    assert client.post("/v1/predictions", json=predict_body(), headers={"X-API-Key": token}).status_code == 202
