"""The dashboard in a real headless Chromium against a running service, Postgres, Redis and worker process."""

from __future__ import annotations

import math
import os
import shutil
from datetime import timedelta
from pathlib import Path
from statistics import NormalDist

import httpx
import pytest
from tests.live_service import LiveService
from tests.waiting import wait_for
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from understudy.bands import QUANTILE_LEVELS, ErrorBand
from understudy.catalog import catalog
from understudy.results import MemoryVerdict
from client import Client
from ledger.models import Host, Prediction, utcnow

REPO = Path(__file__).resolve().parents[2]
TARGETS = ["rtx-3090", "rtx-4090", "t4", "l4", "a100-sxm4-40-gb", "rtx-3060-12-gb", "h100-sxm5-80-gb"]
SMALL = {"model": "resnet18", "mode": "infer", "batch_size": 8, "resolution": 64, "precision": "fp32"}


def use_key(page, live: LiveService) -> None:
    page.fill("#api-key", live.api_key)
    page.click("#key-form button[type=submit]")
    page.wait_for_selector("#key-state:has-text('in this tab')")


def open_dashboard(page, live: LiveService, hash_: str) -> None:
    page.goto(f"{live.url}/dashboard#{hash_}")
    page.wait_for_selector("body[data-ready=true]")


def predict(live: LiveService, workload: dict, targets: list[str], wait: bool = True):
    with Client(live.url, live.api_key) as client:
        return client.predict(workload, targets, estimator="analytic", wait=wait, timeout=60)


def test_a_prediction_submitted_in_the_form_goes_from_queued_to_done_and_draws_one_bar_per_target(page, live,
                                                                                                  artifacts):
    for target in TARGETS:
        catalog().get(target)  # the names below are catalog ids
    live.pause_workers()
    open_dashboard(page, live, "/submit")
    use_key(page, live)
    form = "#submit-form"
    page.fill(f"{form} [name=model]", "resnet18")
    page.select_option(f"{form} [name=mode]", "train")
    page.fill(f"{form} [name=batch_size]", "64")
    page.fill(f"{form} [name=resolution]", "224")
    page.select_option(f"{form} [name=precision]", "amp-fp16")
    page.select_option(f"{form} [name=targets]", TARGETS)
    page.select_option(f"{form} [name=estimator]", "analytic")

    page.click("#submit-button")

    # The worker is held: the page shows every target queued, then updates by itself once the worker runs them.
    page.wait_for_url("**/dashboard#/workload/*")
    page.wait_for_selector("#workload-state[data-state=pending]")
    queued = page.locator("#workload-table tbody tr[data-status=queued]")
    assert queued.count() == len(TARGETS)
    assert "queued" in page.inner_text("#workload-state")
    assert page.evaluate("sessionStorage.getItem('understudy.apiKey')") == live.api_key
    page.evaluate("window.__notReloaded = true")

    live.resume_workers()

    page.wait_for_selector("#workload-state[data-state=final]", timeout=60_000)
    assert page.evaluate("window.__notReloaded") is True
    statuses = page.locator("#workload-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.status)")
    assert statuses == ["done"] * len(TARGETS)
    bars = page.locator("svg#latency-chart rect.bar")
    assert bars.count() == len(TARGETS)
    assert sorted(bars.evaluate_all("bars => bars.map(b => b.dataset.target)")) == sorted(TARGETS)
    heights = bars.evaluate_all("bars => bars.map(b => Number(b.getAttribute('height')))")
    assert all(height > 0 for height in heights)
    assert page.locator("svg#latency-chart text.x-label").count() == len(TARGETS)
    title = page.inner_text("#workload-title")
    assert title == "resnet18 train amp-fp16 b64 224px"

    shot = artifacts / "workload-view.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("UNDERSTUDY_UPDATE_DOCS_SCREENSHOT"):
        shutil.copyfile(shot, REPO / "docs" / "dashboard.png")


def test_the_chart_shows_estimators_side_by_side_with_error_bars_oom_marked_and_the_host_setting(page, live,
                                                                                                 artifacts):
    done = predict(live, SMALL, ["rtx-3090", "t4", "l4"])
    digest = done.data[0].workload_digest
    # A GPU worker's results for the same workload, as the hostaware estimator records them: a spread, a host
    # setting, and one target the workload does not fit.
    with Session(live.db) as session:
        for source in session.scalars(select(Prediction).where(Prediction.workload_digest == digest)):
            oom = source.target_id == "t4"
            session.add(Prediction(
                cache_key=f"gpu-{source.cache_key}"[:64], request_id=None, workload_digest=digest,
                workload=source.workload, model=source.model, target_id=source.target_id, target=source.target,
                estimator="hostaware", estimator_version="2", host_class="gpu:abc123", host_fingerprint="abc123",
                host_name="NVIDIA H200", status="oom" if oom else "done",
                latency_ms=None if oom else source.latency_ms * 1.3, median_ms=None if oom else source.latency_ms * 1.4,
                spread_ms=None if oom else source.latency_ms * 0.2,
                host_setting=None if oom else {"sm_count": 28, "sm_mechanism": "green-context", "clock_mhz": 1695,
                                               "clock_mode": "emulated", "memory_cap_gb": None, "profile": True},
                timing_mode=None if oom else "graph", error="needs about 30.1 GB; NVIDIA Tesla T4 has 16 GB" if oom
                else None, attempts=1, created_at=utcnow(), finished_at=utcnow()))
        session.commit()
    open_dashboard(page, live, f"/workload/{digest}")
    page.wait_for_selector("#workload-state[data-state=final]")

    chart = "svg#latency-chart"
    assert page.locator(f"{chart} rect.bar[data-estimator=analytic]").count() == 3
    assert page.locator(f"{chart} rect.bar[data-estimator=hostaware]").count() == 2
    assert page.locator(f"{chart} .errorbar").count() == 2  # analytic has no spread; hostaware does
    oom = page.locator(f"{chart} rect.oom")
    assert oom.count() == 1 and oom.get_attribute("data-target") == "t4"
    assert page.locator(f"{chart} text.oom-label").text_content() == "OOM"
    legend = page.locator(f"{chart} .legend text").all_text_contents()
    assert legend[:2] == ["analytic", "hostaware"]
    # Side by side: each target's hostaware bar stands right of its analytic bar, in the same slot.
    for target in ("rtx-3090", "l4"):
        xs = {name: float(page.locator(f"{chart} rect.bar[data-target={target}][data-estimator={name}]")
                          .get_attribute("x")) for name in ("analytic", "hostaware")}
        assert 0 < xs["hostaware"] - xs["analytic"] < 200
    setting = page.locator("#workload-table tr[data-target=l4][data-estimator=hostaware] td").nth(8).inner_text()
    assert setting == "28 SMs (green-context), 1695 MHz (emulated)"
    note = page.locator("#workload-table tr[data-target=t4][data-estimator=hostaware] td").nth(10).inner_text()
    assert "needs about 30.1 GB" in note
    page.screenshot(path=str(artifacts / "workload-estimators-oom.png"), full_page=True)


def dashboard_ms(value: float) -> str:
    """A time as the dashboard writes it (fmtMs)."""
    return f"{value:.1f}" if value >= 100 else f"{value:.2f}" if value >= 10 else f"{value:.3f}"


def test_the_chart_draws_each_interval_where_the_api_puts_it_and_the_table_shows_a_tight_verdict(page, live,
                                                                                                 artifacts):
    done = predict(live, SMALL, ["rtx-3090", "t4"])
    digest = done.data[0].workload_digest
    # The RTX 3090's answer with a band of known numbers (normal errors, scale 0.1) and a verdict that is tight.
    band = ErrorBand(model="test", center=0.0, scale=0.1, basis="a test band",
                     z=tuple(NormalDist().inv_cdf(level) for level in QUANTILE_LEVELS))
    tight = MemoryVerdict(verdict="tight", peak_gb=24.0, low_gb=21.6, high_gb=26.4, capacity_gb=24.0,
                          parts_gb={"weights": 0.1, "optimizer": 0.0, "activations": 22.9, "overhead": 1.0})
    with Session(live.db) as session:
        row = session.scalars(select(Prediction).where(Prediction.workload_digest == digest,
                                                       Prediction.target_id == "rtx-3090")).one()
        latency = row.latency_ms
        row.details = {**(row.details or {}), "band": band.model_dump(mode="json"),
                       "memory": tight.model_dump(mode="json")}
        session.commit()
    low, high = latency * math.exp(-0.1 * 1.2815516), latency * math.exp(0.1 * 1.2815516)  # the 80 % interval

    open_dashboard(page, live, f"/workload/{digest}")
    page.wait_for_selector("#workload-state[data-state=final]")

    chart = "svg#latency-chart"
    assert page.locator(f"{chart} g.band").count() == 2  # every done prediction has its band
    drawn = page.locator(f"{chart} g.band[data-target=rtx-3090] rect.band-range")
    bar = page.locator(f"{chart} rect.bar[data-target=rtx-3090]")
    data = page.locator(f"{chart} g.band[data-target=rtx-3090]")
    assert float(data.get_attribute("data-low")) == pytest.approx(low, rel=1e-6)
    assert float(data.get_attribute("data-high")) == pytest.approx(high, rel=1e-6)
    # Drawn on the bar's own scale: the bar's height is its latency, the range's ends are the interval's.
    bar_top, bar_height = float(bar.get_attribute("y")), float(bar.get_attribute("height"))
    pixels_per_ms, baseline = bar_height / latency, bar_top + bar_height
    assert float(drawn.get_attribute("y")) == pytest.approx(baseline - high * pixels_per_ms, rel=1e-6)
    assert float(drawn.get_attribute("height")) == pytest.approx((high - low) * pixels_per_ms, rel=1e-6)
    assert "80 % interval" in page.locator(f"{chart} .legend").text_content()
    assert "bar tight" in bar.get_attribute("class")

    cells = "#workload-table tr[data-target=rtx-3090] td"
    assert page.locator(f"{cells}.interval").inner_text() == f"{dashboard_ms(low)}–{dashboard_ms(high)}"
    verdict = page.locator(f"{cells}.memory .memory-verdict")
    assert (verdict.inner_text(), verdict.get_attribute("data-verdict")) == ("tight 21.6-26.4 GB of 24", "tight")
    assert page.locator("#workload-table tr[data-target=t4] td.memory .memory-verdict").get_attribute(
        "data-verdict") == "fits"
    page.screenshot(path=str(artifacts / "workload-intervals.png"), full_page=True)


def test_the_history_filters_sorts_searches_and_pages_on_the_server(page, live):
    predict(live, SMALL, ["rtx-3090", "t4", "l4"])
    predict(live, {**SMALL, "model": "test_vit"}, ["rtx-3090", "t4"])
    open_dashboard(page, live, "/history?limit=2")
    rows = "#history-table tbody tr"

    page.wait_for_selector("#history-range:has-text('of 5')")
    assert page.locator(rows).count() == 2
    assert page.inner_text("#history-range") == "1–2 of 5"
    page.click("#history-next")
    page.wait_for_selector("#history-range:has-text('3–4 of 5')")
    page.click("#history-next")
    page.wait_for_selector("#history-range:has-text('5–5 of 5')")
    assert page.locator(rows).count() == 1
    assert page.is_disabled("#history-next")

    page.select_option("#history-filters [name=limit]", "25")
    page.select_option("#history-filters [name=target]", "t4")
    page.wait_for_selector("#history-range:has-text('of 2')")
    targets = page.locator(f"{rows} td:nth-child(3)").all_inner_texts()
    assert targets == [catalog().get("t4").name] * 2

    page.click("#history-clear")
    page.wait_for_selector("#history-range:has-text('of 5')")
    page.fill("#history-filters [name=q]", "test_vit")
    page.wait_for_selector("#history-range:has-text('of 2')")
    assert all(text.startswith("test_vit ") for text in page.locator(f"{rows} td:nth-child(2)").all_inner_texts())

    page.click("#history-clear")
    page.wait_for_selector("#history-range:has-text('of 5')")
    page.click("#history-table th button[data-sort=latency]")
    page.wait_for_selector("#history-table[data-sorted='latency:asc']")
    latencies = [float(text) for text in page.locator(f"{rows} td:nth-child(7)").all_inner_texts()]
    assert latencies == sorted(latencies)
    page.click("#history-table th button[data-sort=latency]")
    page.wait_for_selector("#history-table[data-sorted='latency:desc']")
    assert page.get_attribute("#history-table th:nth-child(7)", "aria-sort") == "descending"
    latencies = [float(text) for text in page.locator(f"{rows} td:nth-child(7)").all_inner_texts()]
    assert latencies == sorted(latencies, reverse=True)

    page.select_option("#history-filters [name=status]", "done")
    page.select_option("#history-filters [name=estimator]", "analytic")
    page.fill("#history-filters [name=host]", "cpu")
    page.fill("#history-filters [name=model]", "resnet18")
    page.click("#history-filters button[type=submit]")
    page.wait_for_selector("#history-range:has-text('of 3')")
    assert "model=resnet18" in page.url and "host=cpu" in page.url and "status=done" in page.url

    page.locator(f"{rows} td:nth-child(2) a").first.click()
    page.wait_for_selector("#workload-state[data-state=final]")
    assert page.locator("svg#latency-chart rect.bar").count() == 3


def test_the_live_view_shows_queued_jobs_and_workers_and_updates_without_a_reload(page, live, artifacts):
    live.pause_workers()
    created = predict(live, {**SMALL, "batch_size": 4}, ["rtx-3090", "t4"], wait=False)
    open_dashboard(page, live, "/live")
    page.evaluate("window.__notReloaded = true")

    page.wait_for_selector("#jobs-table tbody tr[data-status=queued]")
    assert page.locator("#jobs-table tbody tr[data-status=queued]").count() == 2
    assert page.inner_text("#jobs-count") == "0 running · 0 estimated · 2 queued"
    assert "No worker has registered" in page.inner_text("#hosts-table")

    with Session(live.db) as session:  # a worker's heartbeat, as `understudy worker` writes it
        session.add(Host(id="gpubox:gpu0", host_class="gpu:abc123", gpu_name="NVIDIA H200", fingerprint="abc123",
                         info={"estimators": {"spec": {}, "hostaware": {}}}, last_heartbeat=utcnow()))
        session.add(Host(id="oldbox:gpu1", host_class="gpu:def456", gpu_name="NVIDIA L4", fingerprint="def456",
                         info={}, last_heartbeat=utcnow() - timedelta(hours=1)))
        session.commit()
    page.wait_for_selector("#hosts-table tbody tr[data-id='gpubox:gpu0']")
    alive = page.locator("#hosts-table tbody tr[data-id='gpubox:gpu0'] .badge").inner_text()
    silent = page.locator("#hosts-table tbody tr[data-id='oldbox:gpu1'] .badge").inner_text()
    assert (alive, silent) == ("alive", "silent")
    # A row caught running, as a worker marks it when it claims the job.
    with Session(live.db) as session:
        session.execute(update(Prediction).where(Prediction.id == created.data[0].id)
                        .values(status="running", started_at=utcnow()))
        session.commit()
    page.wait_for_selector("#jobs-table tbody tr[data-status=running]")
    assert page.inner_text("#jobs-count") == "1 running · 0 estimated · 1 queued"
    page.screenshot(path=str(artifacts / "live-view.png"), full_page=True)
    with Session(live.db) as session:
        session.execute(update(Prediction).where(Prediction.id == created.data[0].id)
                        .values(status="queued", started_at=None))
        session.commit()

    live.resume_workers()

    page.wait_for_selector("#jobs-table td.empty", timeout=60_000)
    assert page.inner_text("#jobs-count") == "0 running · 0 estimated · 0 queued"
    assert page.evaluate("window.__notReloaded") is True


def test_the_form_shows_a_422_naming_the_field_and_asks_for_a_key_without_one(page, live):
    open_dashboard(page, live, "/submit")
    assert page.is_visible("#submit-keyhint")
    page.select_option("#submit-form [name=targets]", ["t4"])
    page.click("#submit-button")
    page.wait_for_selector("#submit-errors:not([hidden])")
    assert "API key" in page.inner_text("#submit-errors")

    use_key(page, live)
    assert not page.is_visible("#submit-keyhint")
    page.fill("#submit-form [name=batch_size]", "0")
    page.click("#submit-button")
    page.wait_for_selector("#submit-errors li:has-text('workload.batch_size')")
    assert "greater than or equal to 1" in page.inner_text("#submit-errors")
    assert page.get_attribute("#submit-form [name=batch_size]", "aria-invalid") == "true"
    assert "#/submit" in page.url  # nothing was created: the form stays

    page.fill("#submit-form [name=batch_size]", "8")
    page.fill("#api-key", "us_not-a-real-key")
    page.click("#key-form button[type=submit]")
    page.click("#submit-button")
    page.wait_for_selector("#submit-errors li:has-text('missing or not valid')")


def test_the_catalog_lists_every_target_and_filters(page, live):
    open_dashboard(page, live, "/catalog")
    page.wait_for_selector("#catalog-table tbody tr")
    assert page.locator("#catalog-table tbody tr").count() == len(catalog())
    page.fill("#catalog-filter", "hopper")
    hopper = [t.id for t in catalog() if "hopper" in f"{t.id} {t.name} {t.architecture}".lower()]
    page.wait_for_function(f"document.querySelectorAll('#catalog-table tbody tr').length === {len(hopper)}")
    assert sorted(page.locator("#catalog-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)")) \
        == sorted(hopper)


def test_the_catalog_shows_the_clocks_a_power_limited_gpu_holds_beside_its_boost(page, live):
    open_dashboard(page, live, "/catalog")
    row = page.locator("#catalog-table tbody tr[data-id='a10-pcie']")
    row.wait_for()
    cells = row.locator("td").all_inner_texts()

    # boost MHz, held MHz at 150 W, held while its tensor cores run at full rate, TDP
    assert cells[4:8] == ["1695", "1250", "992", "150"]


def test_the_page_is_served_with_a_policy_that_allows_only_the_service_itself(live):
    page = httpx.get(f"{live.url}/dashboard")
    script = httpx.get(f"{live.url}/dashboard/static/dashboard.js")

    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert "http" not in page.text.replace(live.url, "")  # no absolute URL to anything
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert ".innerHTML" not in script.text  # data never becomes markup
    assert httpx.get(f"{live.url}/dashboard/static/main.py").status_code == 404


def test_the_live_view_lists_for_each_worker_only_the_estimators_it_can_run(page, live):
    every = {name: {"version": "1", "needs_gpu": name in ("spec", "flops", "hostaware")}
             for name in ("spec", "flops", "analytic", "hostaware", "calibrated")}
    with Session(live.db) as session:  # heartbeats: a GPU worker, and a worker without a GPU that advertised all
        session.add(Host(id="gpubox:gpu0", host_class="gpu:abc123", gpu_name="NVIDIA H200", fingerprint="abc123",
                         info={"estimators": every}, last_heartbeat=utcnow()))
        session.add(Host(id="cpubox:gpu0", host_class="cpu", gpu_name=None, fingerprint="cpu-1",
                         info={"estimators": every}, last_heartbeat=utcnow()))
        session.commit()
    try:
        open_dashboard(page, live, "/live")
        page.wait_for_selector("#hosts-table tbody tr[data-id='cpubox:gpu0']")
        shown = {row: page.inner_text(f"#hosts-table tbody tr[data-id='{row}'] td.estimators")
                 for row in ("gpubox:gpu0", "cpubox:gpu0")}
        assert shown == {"gpubox:gpu0": "spec, flops, analytic, hostaware, calibrated",
                         "cpubox:gpu0": "analytic, calibrated"}
    finally:
        with Session(live.db) as session:
            session.execute(delete(Host).where(Host.id.in_(["gpubox:gpu0", "cpubox:gpu0"])))
            session.commit()


def test_a_running_job_names_its_worker_as_the_workers_table_does(page, live):
    live.pause_workers()
    created = predict(live, {**SMALL, "batch_size": 2}, ["t4"], wait=False)
    with Session(live.db) as session:
        session.add(Host(id="gpubox:gpu0", host_class="cpu", gpu_name=None, fingerprint="cpu-1",
                         info={"estimators": {"analytic": {"version": "4", "needs_gpu": False}}},
                         last_heartbeat=utcnow()))
        session.execute(update(Prediction).where(Prediction.id == created.data[0].id)
                        .values(status="running", started_at=utcnow(), worker_id="us-gpubox:gpu0-4242-a1b2c3"))
        session.commit()
    try:
        open_dashboard(page, live, "/live")
        page.wait_for_selector("#jobs-table tbody tr[data-status=running]")
        worker = page.inner_text("#jobs-table tbody tr[data-status=running] td.worker")
        assert worker == "gpubox:gpu0"
        assert page.locator(f"#hosts-table tbody tr[data-id='{worker}']").count() == 1
    finally:
        with Session(live.db) as session:
            session.execute(update(Prediction).where(Prediction.id == created.data[0].id)
                            .values(status="queued", started_at=None, worker_id=None))
            session.execute(delete(Host).where(Host.id == "gpubox:gpu0"))
            session.commit()
        live.resume_workers()

        def status() -> str:
            with Session(live.db) as session:
                return session.get(Prediction, created.data[0].id).status

        wait_for(lambda: status() == "done", 60, "the held job to run")


def test_the_history_says_it_is_loading_until_its_first_page_arrives(page, live):
    predict(live, SMALL, ["rtx-3090"])
    held: list = []
    released: list[bool] = []
    page.route("**/v1/predictions?*", lambda route: route.continue_() if released else held.append(route))
    page.goto(f"{live.url}/dashboard#/history")
    page.wait_for_selector("#history-table[aria-busy=true] tbody tr.loading")
    assert page.inner_text("#history-table tbody") == "Loading predictions…"
    for _ in range(300):  # Playwright calls the route handler only while the test waits in Playwright
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the history request never came"

    released.append(True)
    for route in held:
        route.continue_()

    page.wait_for_selector("#history-table:not([aria-busy]) tbody tr[data-status=done]")
    assert page.locator("#history-table tbody tr.loading").count() == 0
