"""The dashboard marks a GPU-free estimate apart from a measured answer, in a real headless Chromium against a
running service: a pale, dotted bar and an "estimate" tag while the measurement is awaited; a filled bar with a
hollow point at the estimate once it has landed.

The service's worker makes the estimates for real; a GPU host is registered in the ledger and its measurements land
there from the test (the GPU is the only fake)."""

from __future__ import annotations

from tests.live_service import LiveService
from tests.waiting import wait_for

from client import Client, PredictionRequest

SMALL = {"model": "resnet18", "mode": "infer", "batch_size": 8, "resolution": 64, "precision": "fp32"}
MEASURED_MS = 1.25


def estimated(live: LiveService, targets: list[str]) -> PredictionRequest:
    """A hostaware request whose every prediction carries its estimate and waits for its measurement."""
    live.register_gpu_host()
    with Client(live.url, live.api_key) as client:
        created = client.predict(SMALL, targets, estimator="hostaware", wait=False)

        def all_estimated() -> PredictionRequest | None:
            now = [client.prediction(p.id) for p in created.data]
            return created.model_copy(update={"data": now}) if all(p.estimated for p in now) else None

        return wait_for(all_estimated, 60, "the estimates")


def test_the_workload_view_marks_estimates_apart_from_measured_answers_and_updates_as_they_land(page, live,
                                                                                                artifacts):
    request = estimated(live, ["rtx-3090", "t4"])
    by_target = request.by_target
    live.land_measurement(by_target["t4"].id, MEASURED_MS)

    page.goto(f"{live.url}/dashboard#/workload/{request.data[0].workload_digest}")
    page.wait_for_selector("#workload-table tr[data-target=t4][data-status=done]")

    chart, table = "svg#latency-chart", "#workload-table"
    waiting = page.locator(f"{chart} rect.bar[data-target=rtx-3090]")
    assert waiting.get_attribute("class") == "bar estimate" and waiting.get_attribute("fill-opacity") == "0.2"
    assert waiting.get_attribute("data-answer") == "estimate"
    measured = page.locator(f"{chart} rect.bar[data-target=t4]")
    assert measured.get_attribute("class") == "bar" and measured.get_attribute("data-answer") == "final"
    point = page.locator(f"{chart} circle.estimate-point")
    assert point.count() == 1 and point.get_attribute("data-target") == "t4"
    assert "estimate (no GPU)" in page.locator(f"{chart} .legend").text_content()
    cell = page.locator(f"{table} tr[data-target=rtx-3090] td.estimate")
    assert cell.locator(".answer-tag").text_content() == "estimate"
    assert by_target["rtx-3090"].latency_ms is not None
    assert cell.inner_text().endswith(f"{by_target['rtx-3090'].latency_ms:.3f}")
    assert page.locator(f"{table} tr[data-target=rtx-3090] .badge").inner_text() == "estimated"
    assert page.locator(f"{table} tr[data-target=t4] td.estimate").count() == 0
    assert "estimate " in page.locator(f"{table} tr[data-target=t4] td.note").inner_text()
    assert page.get_attribute("#workload-state", "data-state") == "pending"
    page.screenshot(path=str(artifacts / "workload-estimates.png"), full_page=True)

    live.land_measurement(by_target["rtx-3090"].id, MEASURED_MS)

    page.wait_for_selector("#workload-state[data-state=final]", timeout=30_000)
    assert page.locator(f"{chart} rect.bar.estimate").count() == 0
    assert page.locator(f"{chart} circle.estimate-point").count() == 2


def test_the_history_tags_an_estimated_time_and_filters_by_status_estimated(page, live):
    request = estimated(live, ["l4"])
    with Client(live.url, live.api_key) as client:
        client.predict(SMALL, ["t4"], estimator="analytic", timeout=60)

    page.goto(f"{live.url}/dashboard#/history?status=estimated")
    page.wait_for_selector("#history-range:has-text('of 1')")

    row = page.locator("#history-table tbody tr")
    assert row.get_attribute("data-id") == request.data[0].id
    assert row.get_attribute("data-status") == "estimated"
    assert row.locator("td.estimate .answer-tag").text_content() == "estimate"
    assert page.locator("#history-filters [name=status]").input_value() == "estimated"

