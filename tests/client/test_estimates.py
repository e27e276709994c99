"""The client and progressive answers, against a live service: waiting returns final answers only, `on_update` sees
the GPU-free estimate first, and `wait=False` returns an estimate as the service gives it.

The live service's worker serves only the "cpu" queue and so makes the estimates for real; a GPU host is registered
in the ledger and its measurements land there from the test (the GPU is the only fake)."""

from __future__ import annotations

from tests.waiting import wait_for

from client import Client, Population, Prediction
from understudy.results import Status

SMALL = {"model": "resnet18", "mode": "infer", "batch_size": 8, "resolution": 64, "precision": "fp32"}
MEASURED_MS = 1.25


def estimated(population: Population) -> Population | None:
    return population if population.status == "estimated" else None


def test_waiting_returns_only_the_final_answer_and_on_update_sees_the_estimate_first(live):
    live.register_gpu_host()
    live.pause_workers()
    seen: list[Prediction] = []

    def on_update(prediction: Prediction) -> None:
        seen.append(prediction)
        if prediction.status is Status.queued:
            live.resume_workers()
        if prediction.status is Status.estimated:
            live.land_measurement(prediction.id, MEASURED_MS)

    with Client(live.url, live.api_key) as client:
        [done] = client.predict(SMALL, ["rtx-3090"], estimator="hostaware", timeout=60, on_update=on_update).data

    assert [(p.status, p.answer) for p in seen] == [(Status.queued, None), (Status.estimated, "estimate"),
                                                     (Status.done, "final")]
    estimated = seen[1]
    assert estimated.latency_ms is not None and estimated.estimate is not None
    assert estimated.latency_ms == estimated.estimate.latency_ms and estimated.estimate.estimator == "analytic"
    assert (done.status, done.answer, done.latency_ms) == (Status.done, "final", MEASURED_MS)
    assert done.estimate == estimated.estimate


def test_predict_without_waiting_returns_an_estimate_the_service_already_holds(live):
    live.register_gpu_host()
    with Client(live.url, live.api_key) as client:
        [analytic] = client.predict(SMALL, ["t4"], estimator="analytic", timeout=60).data
        request = client.predict(SMALL, ["t4"], estimator="hostaware", wait=False)

    [prediction] = request.data
    assert not request.final
    assert prediction.estimated and prediction.answer == "estimate"
    assert prediction.latency_ms == analytic.latency_ms and prediction.memory == analytic.memory


def test_a_population_is_read_as_estimated_with_a_provisional_summary_then_done(live):
    live.register_gpu_host()
    with Client(live.url, live.api_key) as client:
        created = client.population(SMALL, {"rtx-3090": 3, "t4": 1}, k=2, estimator="hostaware", wait=False)
        provisional = wait_for(lambda: estimated(client.get_population(created.id)), 60,
                               "the population's estimates")
        for device in provisional.devices:
            live.land_measurement(device.prediction_id, MEASURED_MS)
        final = client.get_population(created.id)

    assert not provisional.final and provisional.summary is not None
    assert [device.answer for device in provisional.devices] == ["estimate", "estimate"]
    assert final.final and final.status == "done"
    assert final.summary is not None and final.summary.max_ms == MEASURED_MS
