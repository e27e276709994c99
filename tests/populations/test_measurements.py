"""A population's measurements against a live service: step times measured on some GPUs calibrate every device's
prediction (the calibrated estimator over the named base), a measured device answering with its measurement and the
others carrying what the measurements say of the workload; the calibrations they make are the population's alone."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest
from tests.live_service import LiveService

from understudy.calibration import TRANSFER_WEIGHT, FitPoint, fit_correction, log_residuals

from .test_api import WORKLOAD, finished, get, post

DEVICES = [{"target": "rtx-3090", "count": 2}, {"target": "t4", "count": 1}, {"target": "l4", "count": 1}]


def analytic(live: LiveService) -> dict[str, dict[str, Any]]:
    """Each device's analytic prediction of WORKLOAD (the base the measurements calibrate), by target id."""
    plain = finished(live, post(live, {"workload": WORKLOAD, "estimator": "analytic", "devices": DEVICES}).json()["id"])
    return {d["target_id"]: get(live, f"/v1/predictions/{d['prediction_id']}") for d in plain["devices"]}


def residual_beyond_its_own_correction(prediction: dict[str, Any], measured_ms: float) -> float:
    """What one point measured on a GPU says of the workload once that GPU's own correction has taken its share."""
    point = FitPoint(predicted_ms=prediction["latency"]["min_ms"], measured_ms=measured_ms, mode="infer",
                     shares=prediction["details"]["class_shares"])
    return log_residuals([point], fit_correction([point]))[0]


def test_measured_devices_answer_as_measured_and_the_others_carry_the_measurements(live):
    base = analytic(live)
    measured = {"rtx-3090": 2.0 * base["rtx-3090"]["latency"]["min_ms"], "t4": 3.0 * base["t4"]["latency"]["min_ms"]}
    body = {"workload": WORKLOAD, "estimator": "analytic", "devices": DEVICES,
            "measurements": [{"target": "RTX 3090", "measured_ms": measured["rtx-3090"]},
                             {"target": "t4", "measured_ms": measured["t4"]}]}

    result = finished(live, post(live, body).json()["id"])

    assert result["status"] == "done" and result["estimator"] == "calibrated"
    assert result["measurements"] == [{"target": target, "measured_ms": ms, "workload": result["workload"]}
                                      for target, ms in measured.items()]
    devices = {d["target_id"]: d for d in result["devices"]}
    assert all(d["calibration_id"] for d in devices.values())
    assert devices["rtx-3090"]["latency_ms"] == pytest.approx(measured["rtx-3090"])
    assert devices["t4"]["latency_ms"] == pytest.approx(measured["t4"])
    # The L4 was not measured: analytic's price times e^(weight x the mean residual the two measured GPUs leave).
    carried = [residual_beyond_its_own_correction(base[t], measured[t]) for t in ("rtx-3090", "t4")]
    assert devices["l4"]["latency_ms"] == pytest.approx(
        base["l4"]["latency"]["min_ms"] * math.exp(TRANSFER_WEIGHT * sum(carried) / len(carried)))
    details = get(live, f"/v1/predictions/{devices['l4']['prediction_id']}")["details"]
    assert (details["base_estimator"], details["measured_here"], details["measured_elsewhere"]) == ("analytic", 0, 2)


def test_a_measurement_of_another_workload_calibrates_the_gpu_it_was_measured_on(live):
    other = {**WORKLOAD, "batch_size": 16}
    body = {"workload": WORKLOAD, "estimator": "analytic", "devices": [{"target": "t4", "count": 1}],
            "measurements": [{"target": "t4", "measured_ms": 1000.0, "workload": other}]}

    result = finished(live, post(live, body).json()["id"])

    (device,) = result["devices"]
    details = get(live, f"/v1/predictions/{device['prediction_id']}")["details"]
    assert result["measurements"][0]["workload"]["batch_size"] == 16
    assert details["measured_here"] == 0 and details["target_scale"] > 1.0  # 1 s is far slower than analytic says


def test_a_populations_calibrations_are_not_the_keys_latest(live):
    body = {"workload": WORKLOAD, "estimator": "analytic", "devices": [{"target": "t4", "count": 1}],
            "measurements": [{"target": "t4", "measured_ms": 5.0}]}
    finished(live, post(live, body).json()["id"])
    headers = {"X-API-Key": live.api_key}

    listed = httpx.get(f"{live.url}/v1/targets/t4/calibrations", headers=headers, timeout=30)
    calibrated = httpx.post(f"{live.url}/v1/predictions", headers=headers, timeout=30,
                            json={"workload": WORKLOAD, "targets": ["t4"], "estimator": "calibrated"})

    assert listed.status_code == 200 and listed.json()["count"] == 0
    assert calibrated.status_code == 409 and "has none of yours" in calibrated.json()["detail"]


def test_the_same_measurements_again_name_the_calibration_their_cached_prediction_used(live):
    body = {"workload": WORKLOAD, "estimator": "analytic", "devices": [{"target": "l4", "count": 1}],
            "measurements": [{"target": "l4", "measured_ms": 7.0}]}
    (first,) = finished(live, post(live, body).json()["id"])["devices"]

    (again,) = finished(live, post(live, body).json()["id"])["devices"]

    assert again["prediction_id"] == first["prediction_id"]  # the cached answer
    assert again["calibration_id"] == first["calibration_id"]


@pytest.mark.parametrize("change, field", [
    ({"estimator": "calibrated"}, "measurements"),
    ({"measurements": [{"target": "no-such-gpu", "measured_ms": 5.0}]}, "measurements[0].target"),
    ({"measurements": [{"target": "t4", "measured_ms": 0}]}, "measurements[0].measured_ms"),
    ({"measurements": [{"target": "t4", "measured_ms": 5.0}] * 51}, "measurements"),
])
def test_a_bad_measurement_is_a_422_naming_the_field(live, change, field):
    body = {"workload": WORKLOAD, "devices": [{"target": "t4", "count": 1}],
            "measurements": [{"target": "t4", "measured_ms": 5.0}], **change}

    answer = post(live, body)

    assert answer.status_code == 422, answer.text
    assert field in [error["field"] for error in answer.json()["errors"]], answer.json()
