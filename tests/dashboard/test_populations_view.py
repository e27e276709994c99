"""The dashboard's population view in a real headless Chromium against a running service: the fleet's step-time
CDF, the round time against K, the deadline curve, and a trace downloaded from the page."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

from tests.live_service import LiveService

from client import Client

REPO = Path(__file__).resolve().parents[2]
WORKLOAD = {"model": "resnet18", "mode": "train", "batch_size": 32, "resolution": 224, "precision": "amp-fp16"}
FLEET = [{"target": "rtx-4060", "count": 200}, {"target": "rtx-3060-12-gb", "count": 120},
         {"target": "gtx-1660-super", "count": 80}, {"target": "t4", "count": 60},
         {"target": {"name": "Jetson Orin Nano class (8 GB)", "architecture": "Ampere", "sm_count": 8,
                     "boost_clock_mhz": 625, "memory_bandwidth_gbps": 68, "memory_size_gb": 8}, "count": 100}]


def population(live: LiveService) -> str:
    with Client(live.url, live.api_key) as client:
        done = client.population(WORKLOAD, FLEET, k=[10], estimator="analytic", timeout=120)
    assert done.status == "done"
    return done.id


def test_a_population_opens_with_its_distribution_round_time_against_k_and_deadline_curve(page, live, artifacts):
    population_id = population(live)
    page.goto(f"{live.url}/dashboard#/populations")
    page.wait_for_selector("body[data-ready=true]")

    row = page.locator(f"#populations-table tbody tr[data-id='{population_id}']")
    row.click()

    page.wait_for_url(f"**/dashboard#/populations/{population_id}")
    page.wait_for_selector("#population-rounds[data-state=drawn]", timeout=30_000)
    assert page.locator("svg#fleet-cdf circle.point").count() == len(FLEET)
    shares = page.locator("svg#fleet-cdf circle.point").evaluate_all("ps => ps.map(p => Number(p.dataset.y))")
    assert shares == sorted(shares) and abs(shares[-1] - 1.0) < 1e-9
    k_points = page.locator("svg#round-vs-k-chart circle.point")
    assert k_points.count() == 8  # K = 1, 2, 5, ... 200
    expected = k_points.evaluate_all("ps => ps.map(p => Number(p.dataset.y))")
    assert expected == sorted(expected)  # a larger K waits for a slower slowest client
    assert page.locator("svg#deadline-curve-chart path.series").count() == 3
    assert page.locator("#round-kinds tbody tr").count() == len(FLEET)

    page.fill("#rounds-form [name=sigma]", "0.3")
    page.fill("#rounds-form [name=deadline_s]", "20")
    page.evaluate("document.querySelector('#population-rounds').dataset.state = ''")
    page.click("#rounds-form button[type=submit]")
    page.wait_for_selector("#population-rounds[data-state=drawn]")
    assert page.locator("svg#deadline-curve-chart line.deadline-marker").count() == 1
    assert "P(K by 20 s)" in page.inner_text("#round-outcomes")

    shot = artifacts / "population-view.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("UNDERSTUDY_UPDATE_DOCS_SCREENSHOT"):
        shutil.copyfile(shot, REPO / "docs" / "populations.png")


def test_a_trace_downloads_from_the_page(page, live, tmp_path):
    population_id = population(live)
    page.goto(f"{live.url}/dashboard#/populations/{population_id}")
    page.wait_for_selector("#population-rounds[data-state=drawn]", timeout=30_000)
    page.select_option("#trace-form [name=format]", "fedscale")
    page.fill("#trace-form [name=clients]", "40")

    with page.expect_download() as download:
        page.click("#trace-download")

    path = tmp_path / download.value.suggested_filename
    download.value.save_as(path)
    assert path.name == f"population-{population_id}.fedscale.pkl"
    assert sorted(pickle.loads(path.read_bytes())) == list(range(40))
    assert "downloaded" in page.inner_text("#trace-state")


def test_a_measured_population_says_what_calibrated_it(page, live):
    with Client(live.url, live.api_key) as client:
        done = client.population(WORKLOAD, FLEET[:2], k=[10], estimator="analytic",
                                 measurements={"rtx-4060": 95.0, "t4": 160.0}, timeout=120)
    page.goto(f"{live.url}/dashboard#/populations/{done.id}")
    page.wait_for_selector("#population-state[data-state=done]", timeout=30_000)

    assert page.inner_text("#population-state").startswith("calibrated by 2 measured step time(s): p50 ")
