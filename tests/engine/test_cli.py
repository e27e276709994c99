"""`understudy predict` and `understudy targets` end to end, in-process through typer's runner, on a machine
without a GPU (NVML made unloadable, so this also holds on the GPU test host), with a SQLite cache and a cache
folder (the remembered host probe) per test; what `predict` shows before and after it measures, on a fake H200."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from tests.fakes import FakeNvml, FakeTimer, RestrictionRecorder, h200_host
from typer.testing import CliRunner

from cli.main import cli
from understudy.bands import ErrorBand
from understudy.settings import get_settings
from understudy.workload import Workload

RUNNER = CliRunner()


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The folder where `predict` remembers its host probe, one per test."""
    monkeypatch.setenv("UNDERSTUDY_CACHE_DIR", str(tmp_path / "cache"))
    get_settings.cache_clear()
    yield tmp_path / "cache"
    get_settings.cache_clear()


@pytest.fixture
def database_url(tmp_path: Path, no_gpu: None) -> str:
    return f"sqlite:///{tmp_path / 'predictions.sqlite'}"


def invoke(*args: str, columns: int = 200) -> Any:
    return RUNNER.invoke(cli, list(args), env={"COLUMNS": str(columns)})


def predict_json(database_url: str, model: str, targets: str, *extra: str) -> dict[str, Any]:
    result = invoke("predict", model, "--targets", targets, "--json", "--database-url", database_url, *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def words(text: str) -> str:
    """Text with line wrapping undone (the error console wraps long messages)."""
    return " ".join(text.split())


def test_predict_without_gpu_uses_analytic_and_says_so(database_url: str) -> None:
    result = invoke("predict", "resnet18", "--targets", "rtx-3060,t4", "--json", "--database-url", database_url)
    assert result.exit_code == 0, result.output
    assert "no NVIDIA GPU found" in words(result.stderr)
    assert "using the analytic estimator" in words(result.stderr)
    out = json.loads(result.stdout)
    assert [p["estimator"] for p in out["predictions"]] == ["analytic", "analytic"]
    assert [p["status"] for p in out["predictions"]] == ["done", "done"]
    assert out["host"]["gpu_name"] is None


def test_predict_json_describes_the_workload_in_canonical_form(database_url: str) -> None:
    out = predict_json(database_url, "resnet18", "t4", "--mode", "infer", "--batch-size", "8",
                       "--optimizer", "adamw")
    assert out["workload"] == Workload(model="resnet18", mode="infer", batch_size=8).canonical()
    assert out["predictions"][0]["workload_digest"] == Workload(model="resnet18", mode="infer", batch_size=8).digest()


def test_a_pytorch_1_target_is_predicted_slower_for_a_vit_whose_attention_it_runs_unfused(database_url: str) -> None:
    today, legacy = (predict_json(database_url, "vit_small_patch16_224", "rtx-3090", "--mode", "infer",
                                  "--torch-major", major) for major in ("2", "1"))
    assert legacy["workload"]["torch_major"] == 1 and "torch_major" not in today["workload"]
    assert legacy["predictions"][0]["latency_ms"] > today["predictions"][0]["latency_ms"]


def test_a_reparameterized_model_is_predicted_faster_than_its_training_form(database_url: str) -> None:
    plain, folded = (predict_json(database_url, "repvgg_a0", "rtx-3090", "--mode", "infer", *flag)
                     for flag in ((), ("--reparam",)))
    assert folded["workload"]["reparam"] is True and "reparam" not in plain["workload"]
    assert folded["predictions"][0]["latency_ms"] < plain["predictions"][0]["latency_ms"]


def test_repeat_predict_is_served_from_the_sqlite_cache(database_url: str) -> None:
    first = predict_json(database_url, "test_vit", "rtx-3060,rtx-4090")
    again = predict_json(database_url, "test_vit", "rtx-3060,rtx-4090")
    assert [p["cached"] for p in first["predictions"]] == [False, False]
    assert [p["cached"] for p in again["predictions"]] == [True, True]
    assert [p["latency_ms"] for p in again["predictions"]] == [p["latency_ms"] for p in first["predictions"]]
    assert Path(database_url.removeprefix("sqlite:///")).is_file()


def test_cache_serves_only_the_same_workload(database_url: str) -> None:
    predict_json(database_url, "test_vit", "t4")
    other = predict_json(database_url, "test_vit", "t4", "--mode", "infer")
    assert other["predictions"][0]["cached"] is False


def test_cache_serves_a_target_whatever_its_spelling(database_url: str) -> None:
    predict_json(database_url, "test_vit", "rtx-3060-12-gb")
    again = predict_json(database_url, "test_vit", "RTX 3060")
    assert again["predictions"][0]["cached"] is True


def test_three_spellings_of_one_target_resolve_to_one_id(database_url: str) -> None:
    out = predict_json(database_url, "test_vit", "rtx3060,RTX 3060,GeForce RTX 3060 (12 GB)")
    assert [p["target_id"] for p in out["predictions"]] == ["rtx-3060-12-gb"] * 3
    assert len({p["latency_ms"] for p in out["predictions"]}) == 1


def test_unknown_model_is_a_clear_error_listing_close_matches(database_url: str) -> None:
    result = invoke("predict", "resnet5", "--targets", "t4", "--database-url", database_url)
    assert result.exit_code == 2
    assert "unknown timm model 'resnet5'; close matches: resnet50" in words(result.stderr)
    assert result.stdout == ""


def test_unknown_target_lists_close_names(database_url: str) -> None:
    result = invoke("predict", "resnet18", "--targets", "rtx 3099", "--database-url", database_url)
    assert result.exit_code == 2
    assert "unknown target 'rtx 3099'; did you mean" in words(result.stderr)
    assert "rtx-3090" in result.stderr


def test_ambiguous_target_lists_the_candidates(database_url: str) -> None:
    result = invoke("predict", "resnet18", "--targets", "A100", "--database-url", database_url)
    assert result.exit_code == 2
    message = words(result.stderr)
    assert "target 'A100' is ambiguous" in message
    assert "a100-sxm4-40-gb" in message and "a100-sxm4-80-gb" in message


@pytest.mark.parametrize("estimator", ["spec", "hostaware", "flops"])
def test_gpu_estimator_without_gpu_exits_2_with_a_message(database_url: str, estimator: str) -> None:
    result = invoke("predict", "resnet18", "--targets", "t4", "--estimator", estimator, "--database-url",
                    database_url)
    assert result.exit_code == 2
    assert f"estimator '{estimator}' times the workload on an NVIDIA GPU and this machine has none; use --estimator " \
           "analytic" in words(result.stderr)


def test_invalid_option_value_names_the_field(database_url: str) -> None:
    result = invoke("predict", "resnet18", "--targets", "t4", "--precision", "fp8", "--database-url", database_url)
    assert result.exit_code == 2
    assert "precision:" in words(result.stderr)


def test_predict_prints_a_table_without_json(database_url: str) -> None:
    result = invoke("predict", "test_vit", "--targets", "t4", "--database-url", database_url)
    assert result.exit_code == 0, result.output
    assert "NVIDIA Tesla T4" in result.stdout
    from engine.estimators.analytic import AnalyticEstimator

    assert f"analytic@{AnalyticEstimator.version}" in result.stdout
    assert "test_vit train amp-fp16 b32 224px on no GPU" in words(result.stdout)


# --- the interval and the memory verdict --------------------------------------------------------------------------

def ms(value: float) -> str:
    return f"{value:.1f}" if value >= 100 else f"{value:.2f}"


def table_row(stdout: str, name: str) -> str:
    return next(line for line in stdout.splitlines() if name in line)


def test_the_json_gives_each_time_its_interval_coverage_band_and_memory_verdict(database_url: str) -> None:
    [prediction] = predict_json(database_url, "test_vit", "t4")["predictions"]
    low, high = ErrorBand.model_validate(prediction["band"]).multipliers(0.8)
    assert prediction["coverage"] == 0.8
    assert prediction["interval_ms"] == [pytest.approx(prediction["latency_ms"] * low),
                                         pytest.approx(prediction["latency_ms"] * high)]
    assert prediction["memory"]["verdict"] == "fits" and prediction["memory"]["capacity_gb"] == 16


def test_coverage_chooses_the_interval(database_url: str) -> None:
    [default] = predict_json(database_url, "test_vit", "t4")["predictions"]
    [half] = predict_json(database_url, "test_vit", "t4", "--coverage", "0.5")["predictions"]
    assert half["coverage"] == 0.5 and half["cached"] is True
    assert default["interval_ms"][0] < half["interval_ms"][0] < half["interval_ms"][1] < default["interval_ms"][1]


@pytest.mark.parametrize("coverage", ["0.99", "0.3", "1"])
def test_a_coverage_outside_half_to_95_percent_exits_2_saying_so(database_url: str, coverage: str) -> None:
    result = invoke("predict", "test_vit", "--targets", "t4", "--coverage", coverage, "--database-url",
                    database_url)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: --coverage: coverage must be from 0.5 to 0.95, got {float(coverage)}"
    assert result.stdout == ""


def test_the_table_shows_each_time_with_its_interval_and_that_it_fits(database_url: str) -> None:
    [prediction] = predict_json(database_url, "test_vit", "t4")["predictions"]
    result = invoke("predict", "test_vit", "--targets", "t4", "--database-url", database_url)
    low, high = prediction["interval_ms"]
    row = table_row(result.stdout, "NVIDIA Tesla T4")
    assert f"{ms(prediction['latency_ms'])} ({ms(low)}-{ms(high)})" in row
    assert f"fits {prediction['memory']['peak_gb']:.1f} GB" in row
    assert "80% of measured times fall inside" in words(result.stdout)


def test_a_target_whose_memory_lies_inside_the_peaks_band_is_tight_in_the_table(database_url: str,
                                                                                  tmp_path: Path) -> None:
    memory = predict_json(database_url, "test_vit", "t4")["predictions"][0]["memory"]  # its peak, whatever the card
    capacity = (memory["low_gb"] + memory["high_gb"]) / 2
    (tmp_path / "edge.json").write_text(json.dumps({**LAPTOP, "name": "Edge", "memory_size_gb": capacity}))

    result = invoke("predict", "test_vit", "--target-spec", str(tmp_path / "edge.json"), "--database-url",
                    database_url)

    assert result.exit_code == 0, result.output
    expected = f"tight {memory['low_gb']:.1f}-{memory['high_gb']:.1f} GB of {capacity:g}"
    assert expected in table_row(result.stdout, "Edge")


def test_a_workload_that_does_not_fit_says_oom_and_how_much_it_needs_at_least(database_url: str) -> None:
    # ViT-L training at batch 256 needs about 50 GB: even the low end of its band is over the 3060's 12.
    result = invoke("predict", "vit_large_patch16_224", "--targets", "rtx3060", "--batch-size", "256", "--json",
                    "--database-url", database_url)
    [prediction] = json.loads(result.stdout)["predictions"]
    table = invoke("predict", "vit_large_patch16_224", "--targets", "rtx3060", "--batch-size", "256",
                   "--database-url", database_url)

    assert (result.exit_code, table.exit_code) == (0, 0)
    assert (prediction["status"], prediction["interval_ms"], prediction["memory"]["verdict"]) == ("oom", None, "oom")
    assert f"oom >= {prediction['memory']['low_gb']:.1f} GB" in table_row(table.stdout, "RTX 3060")


def test_a_cached_answer_keeps_its_interval_and_memory_verdict(database_url: str) -> None:
    [first] = predict_json(database_url, "test_vit", "t4")["predictions"]
    [again] = predict_json(database_url, "test_vit", "t4")["predictions"]
    assert again["cached"] is True
    assert (again["interval_ms"], again["band"], again["memory"]) == (first["interval_ms"], first["band"],
                                                                      first["memory"])


def test_targets_lists_the_catalog_as_json() -> None:
    result = invoke("targets", "--json")
    assert result.exit_code == 0
    listed = json.loads(result.stdout)
    assert len(listed) >= 50
    assert {"rtx-3060-12-gb", "h200-sxm-141-gb"} <= {t["id"] for t in listed}


def test_targets_prints_a_table() -> None:
    result = invoke("targets")
    assert result.exit_code == 0
    assert "rtx-3060-12-gb" in result.stdout and "GeForce RTX 3060 (12 GB)" in result.stdout


def test_installed_command_runs() -> None:
    command = Path(sys.executable).parent / "understudy"
    if not command.exists():
        pytest.skip("the understudy command is not installed next to this interpreter")
    done = subprocess.run([str(command), "targets", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert any(t["id"] == "t4" for t in json.loads(done.stdout))


def test_evaluate_refuses_a_workload_time_limit_without_measure_only(tmp_path: Path, no_gpu: None) -> None:
    groundtruth = tmp_path / "rows.csv"
    groundtruth.write_text("target,model,mode,precision,batch_size,resolution,memory_format,optimizer,latency_ms\n")
    result = invoke("evaluate", str(groundtruth), "--out", str(tmp_path / "out"), "--workload-timeout-s", "60")
    assert result.exit_code == 2
    assert "add --measure-only" in words(result.output)


# --- what a new user meets: exit codes, failures, narrow terminals, help, progress -------------------------------

def test_a_failed_target_exits_1(database_url: str) -> None:
    result = invoke("predict", "resnet18", "--targets", "t4", "--estimator", "calibrated", "--database-url",
                    database_url)
    assert result.exit_code == 1


def test_a_failed_target_is_one_short_line_under_the_table(database_url: str) -> None:
    result = invoke("predict", "resnet18", "--targets", "t4", "--estimator", "calibrated", "--database-url",
                    database_url, columns=80)
    lines = [line for line in result.stderr.splitlines() if ": failed: " in line]
    assert len(lines) == 1
    assert lines[0].startswith("NVIDIA Tesla T4 (t4): failed: target NVIDIA Tesla T4 (t4) has no calibration")
    assert len(lines[0]) <= 140
    assert "POST /v1/targets" not in result.output  # the rest of the reason waits for -v
    assert "has no calibration" not in result.stdout  # not in the table's cells


def test_verbose_gives_a_failure_its_whole_reason(database_url: str) -> None:
    result = invoke("predict", "resnet18", "--targets", "t4", "--estimator", "calibrated", "--database-url",
                    database_url, "-v")
    assert result.exit_code == 1
    assert "POST /v1/targets/t4/calibrations" in words(result.stderr)


def test_json_with_a_failed_target_exits_1_with_the_whole_reason(database_url: str) -> None:
    result = invoke("predict", "resnet18", "--targets", "t4", "--estimator", "calibrated", "--json",
                    "--database-url", database_url)
    assert result.exit_code == 1
    [prediction] = json.loads(result.stdout)["predictions"]
    assert prediction["status"] == "failed"
    assert "POST /v1/targets/t4/calibrations" in prediction["error"]


def test_one_failed_target_of_two_still_shows_the_other_and_exits_1(database_url: str, tmp_path: Path) -> None:
    points = {"rtx-3090": {"points": [{"workload": {"model": "test_vit"}, "measured_ms": 3.0}],
                           "base_estimator": "analytic"}}
    (tmp_path / "points.json").write_text(json.dumps(points))
    result = invoke("predict", "test_vit", "--targets", "rtx3090,t4", "--estimator", "calibrated", "--calibration",
                    str(tmp_path / "points.json"), "--json", "--database-url", database_url)
    assert result.exit_code == 1
    assert [p["status"] for p in json.loads(result.stdout)["predictions"]] == ["done", "failed"]


def test_no_targets_is_a_usage_error(database_url: str) -> None:
    result = invoke("predict", "resnet18", "--targets", "", "--database-url", database_url)
    assert result.exit_code == 2
    assert "no targets" in words(result.stderr)
    assert result.stdout == ""


LAPTOP = {"name": "RTX 4090 Laptop", "sm_count": 76, "boost_clock_mhz": 2040, "memory_bandwidth_gbps": 576,
          "memory_size_gb": 16}


def test_a_gpu_described_in_a_target_spec_file_is_predicted_beside_the_named_ones(database_url: str,
                                                                                  tmp_path: Path) -> None:
    (tmp_path / "laptop.json").write_text(json.dumps(LAPTOP))
    out = predict_json(database_url, "resnet18", "t4", "--target-spec", str(tmp_path / "laptop.json"))

    assert [p["target_name"] for p in out["predictions"]] == ["NVIDIA Tesla T4", "RTX 4090 Laptop"]
    assert out["predictions"][1]["target_id"].startswith("inline-")
    assert [p["status"] for p in out["predictions"]] == ["done", "done"]


def test_a_target_spec_file_may_list_several_gpus_and_stand_alone(database_url: str) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "rtx4090-laptop.json"  # at 150 W and at 80 W
    result = invoke("predict", "resnet18", "--target-spec", str(example), "--json", "--database-url", database_url)
    assert result.exit_code == 0, result.output

    at_150_w, at_80_w = (p["latency_ms"] for p in json.loads(result.stdout)["predictions"])
    assert at_80_w > at_150_w  # 80 W holds a lower clock


def test_a_calibration_of_other_gpus_alone_answers_for_a_gpu_never_measured(database_url: str) -> None:
    # ConvNeXt-T measured on an RTX 3090 and an RTX 4090 (timm's public rows), asked about an RTX 3060.
    example = Path(__file__).resolve().parents[2] / "examples" / "measured-elsewhere.json"
    result = invoke("predict", "convnext_tiny", "--mode", "infer", "--batch-size", "1024", "--precision", "amp-fp16",
                    "--targets", "rtx3060", "--estimator", "calibrated", "--calibration", str(example), "--json",
                    "--database-url", database_url)
    assert result.exit_code == 0, result.output

    [prediction] = json.loads(result.stdout)["predictions"]
    details = prediction["details"]
    # No correction of the RTX 3060's own: its factor is one (a sum of kernel-class shares, to rounding).
    assert details["measured_elsewhere"] == 2 and details["target_scale"] == pytest.approx(1.0, rel=1e-12)
    assert prediction["latency_ms"] == pytest.approx(details["base_latency_ms"] * details["scale"])
    assert details["scale"] != 1.0


def test_a_target_spec_the_api_would_refuse_is_a_usage_error_saying_why(database_url: str, tmp_path: Path) -> None:
    (tmp_path / "laptop.json").write_text(json.dumps({**LAPTOP, "tdp_w": 80}))
    result = invoke("predict", "resnet18", "--target-spec", str(tmp_path / "laptop.json"), "--database-url",
                    database_url)
    assert result.exit_code == 2
    assert "tdp_w needs gpu_chip" in words(result.stderr)


def test_an_unreadable_target_spec_file_is_a_usage_error_naming_it(database_url: str, tmp_path: Path) -> None:
    (tmp_path / "laptop.json").write_text("{not json")
    result = invoke("predict", "resnet18", "--target-spec", str(tmp_path / "laptop.json"), "--database-url",
                    database_url)
    assert result.exit_code == 2
    assert "cannot read the target spec file" in words(result.stderr)


def test_every_target_answered_exits_0(database_url: str) -> None:
    result = invoke("predict", "test_vit", "--targets", "t4,rtx3090", "--database-url", database_url)
    assert result.exit_code == 0


def test_targets_on_a_wide_terminal_show_the_clock_each_gpu_holds_at_its_rated_power() -> None:
    result = invoke("targets", columns=160)
    a10 = next(line.split() for line in result.stdout.splitlines() if line.startswith(" a10-pcie"))
    # held MHz, tensor MHz, W: the 150 W A10 below its 1695 MHz boost, and lower still under full-rate tensor work
    assert a10[-7:-4] == ["1250", "992", "150"]


def test_targets_at_80_columns_cut_no_id() -> None:
    from understudy.catalog import catalog

    result = invoke("targets", columns=80)
    assert result.exit_code == 0
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    shown = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    assert {spec.id for spec in catalog()} <= shown


@pytest.mark.parametrize("command", [[], ["predict"], ["evaluate"], ["targets"], ["worker"], ["keys", "list"]])
def test_help_shows_no_type_beside_a_flag(command: list[str]) -> None:
    from cli.service import register

    register(cli)
    result = invoke(*command, "--help", columns=100)
    assert result.exit_code == 0
    assert "--help" in result.stdout
    assert "<bool>" not in result.stdout


def test_progress_stays_out_of_output_that_is_not_a_terminal(database_url: str) -> None:
    result = invoke("predict", "test_vit", "--targets", "t4", "--json", "--database-url", database_url)
    assert result.exit_code == 0
    assert "looking up the cache" not in result.output
    assert "⠋" not in result.output


def test_a_cached_answer_imports_no_torch(database_url: str, cache_dir: Path) -> None:
    """In a fresh process, as a user runs it: the first answer builds the engine, the repeat comes from the store
    before anything heavy is imported."""
    code = ("import sys\n"
            "from cli.main import main\n"
            "try:\n    main()\n"
            "finally:\n    print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr)\n")
    args = [sys.executable, "-c", code, "predict", "test_vit", "--targets", "t4,rtx3090", "--estimator", "analytic",
            "--json", "--database-url", database_url]
    env = {**os.environ, "UNDERSTUDY_CACHE_DIR": str(cache_dir)}
    first = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    again = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0, first.stderr
    assert again.returncode == 0, again.stderr
    assert "torch imported" in first.stderr
    assert "no torch" in again.stderr
    assert [p["cached"] for p in json.loads(again.stdout)["predictions"]] == [True, True]
    for key in ("latency_ms", "interval_ms", "memory"):
        assert json.loads(again.stdout)["predictions"][0][key] == json.loads(first.stdout)["predictions"][0][key]


# --- on a GPU: estimates at once, then the measured answers ------------------------------------------------------

@pytest.fixture
def gpu_timer(monkeypatch: pytest.MonkeyPatch, nvml: FakeNvml, recorder: RestrictionRecorder) -> FakeTimer:
    """This machine plays an H200 (tests.fakes): its NVML and probe are the fake's, its restrictions recorded, and
    each measurement is the fake timer's, made at once."""
    timer = FakeTimer(nvml=nvml)
    monkeypatch.setattr("engine.probe.load_nvml", lambda: nvml)
    monkeypatch.setattr("engine.engine.probe_host", lambda gpu_index=0, nvml=None: h200_host())
    monkeypatch.setattr("engine.timing.StepTimer", timer)
    return timer


@pytest.fixture
def gpu_database_url(tmp_path: Path, gpu_timer: FakeTimer) -> str:
    return f"sqlite:///{tmp_path / 'predictions.sqlite'}"


def test_no_wait_prints_the_estimates_and_measures_nothing(gpu_database_url: str, gpu_timer: FakeTimer) -> None:
    result = invoke("predict", "test_vit", "--targets", "t4,rtx3090", "--no-wait", "--database-url",
                    gpu_database_url)
    assert result.exit_code == 0, result.output
    for name in ("NVIDIA Tesla T4", "GeForce RTX 3090"):
        assert "analytic@" in table_row(result.stdout, name) and "estimated" in table_row(result.stdout, name)
    assert "estimated: the analytic roofline's answer" in words(result.stdout)
    assert gpu_timer.calls == []


def test_no_wait_json_says_each_answer_is_an_estimate(gpu_database_url: str, gpu_timer: FakeTimer) -> None:
    out = predict_json(gpu_database_url, "test_vit", "t4,rtx3090", "--no-wait")
    assert [(p["answer"], p["estimator"]) for p in out["predictions"]] == [("estimate", "analytic")] * 2
    assert gpu_timer.calls == []


def test_estimates_alone_never_probe_the_host(gpu_database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Probing initialises CUDA, a second or more on a GPU host; an estimate needs no GPU, so none is made for it."""
    probed: list[int] = []
    monkeypatch.setattr("engine.engine.probe_host",
                        lambda gpu_index=0, nvml=None: probed.append(gpu_index) or h200_host())
    result = invoke("predict", "test_vit", "--targets", "t4,rtx3090", "--no-wait", "--database-url",
                    gpu_database_url)
    assert result.exit_code == 0, result.output
    assert "test_vit train amp-fp16 b32 224px on NVIDIA H200" in result.stdout
    assert "estimated" in table_row(result.stdout, "NVIDIA Tesla T4")
    assert probed == []


def test_an_estimate_is_cached_so_a_repeat_has_it_at_once(gpu_database_url: str) -> None:
    first = predict_json(gpu_database_url, "test_vit", "t4", "--no-wait")
    again = predict_json(gpu_database_url, "test_vit", "t4", "--no-wait")
    assert [(p["answer"], p["cached"]) for p in again["predictions"]] == [("estimate", True)]
    assert again["predictions"][0]["latency_ms"] == first["predictions"][0]["latency_ms"]


def test_no_wait_gives_a_cached_measured_answer_as_final_and_estimates_only_the_rest(gpu_database_url: str) -> None:
    predict_json(gpu_database_url, "test_vit", "t4")
    out = predict_json(gpu_database_url, "test_vit", "t4,rtx3090", "--no-wait")
    assert [(p["answer"], p["estimator"], p["cached"]) for p in out["predictions"]] == [
        ("final", "hostaware", True), ("estimate", "analytic", False)]


def test_json_prints_only_the_final_answers(gpu_database_url: str, gpu_timer: FakeTimer) -> None:
    out = predict_json(gpu_database_url, "test_vit", "t4,rtx3090")
    assert [(p["answer"], p["estimator"]) for p in out["predictions"]] == [("final", "hostaware")] * 2
    assert len(gpu_timer.calls) == 1


def test_piped_output_is_the_final_table_alone(gpu_database_url: str) -> None:
    result = invoke("predict", "test_vit", "--targets", "t4,rtx3090", "--database-url", gpu_database_url)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("test_vit train amp-fp16 b32 224px on NVIDIA H200") == 1
    assert [line.count("hostaware@") for line in result.stdout.splitlines() if "│ " in line] == [1, 1]
    assert "estimate" not in result.stdout and "analytic" not in result.stdout


@pytest.mark.parametrize(("base", "answer"), [("hostaware", "estimate"), ("analytic", "final")])
def test_a_calibrated_estimator_shows_estimates_first_only_over_a_base_that_measures(
        gpu_database_url: str, tmp_path: Path, base: str, answer: str) -> None:
    points = {"t4": {"points": [{"workload": {"model": "test_vit"}, "measured_ms": 3.0}], "base_estimator": base}}
    (tmp_path / "points.json").write_text(json.dumps(points))
    out = predict_json(gpu_database_url, "test_vit", "t4", "--estimator", "calibrated", "--calibration",
                       str(tmp_path / "points.json"), "--no-wait")
    assert [p["answer"] for p in out["predictions"]] == [answer]


def test_without_a_gpu_no_wait_changes_nothing_the_answer_is_final(database_url: str) -> None:
    out = predict_json(database_url, "test_vit", "t4", "--no-wait")
    assert [(p["answer"], p["estimator"]) for p in out["predictions"]] == [("final", "analytic")]


@pytest.mark.parametrize("verbose", [False, True])
def test_how_long_the_estimates_took_is_said_only_with_verbose(gpu_database_url: str, verbose: bool) -> None:
    result = invoke("predict", "test_vit", "--targets", "t4", "--no-wait", *(["-v"] if verbose else []),
                    "--database-url", gpu_database_url)
    assert result.exit_code == 0, result.output
    assert ("estimates after" in result.stderr) is verbose


def terminal_screen(raw: str) -> list[str]:
    """The lines a terminal shows after `raw`: carriage returns, newlines, cursor-up (CSI n A) and erase-line
    (CSI 2K) applied, styles (CSI m) and the cursor's visibility (CSI ?25 h/l) dropped. Any other escape fails the
    test rather than being drawn wrong."""
    lines, row, col = [""], 0, 0
    for token in re.finditer(r"\x1b\[(\??[0-9;]*)([A-Za-z])|\r|\n|[^\x1b\r\n]+", raw):
        text, params, command = token.group(0), token.group(1), token.group(2)
        if command == "A":
            row = max(0, row - int(params or 1))
        elif command == "K" and params == "2":
            lines[row] = ""
        elif command == "m" or (command in ("h", "l") and params == "?25"):
            pass
        elif command is not None:
            raise AssertionError(f"an escape the test does not draw: {text!r}")
        elif text == "\r":
            col = 0
        elif text == "\n":
            row, col = row + 1, 0
            lines += [""] * (row + 1 - len(lines))
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + text + line[col + len(text):]
            col += len(text)
    return lines


def test_on_a_terminal_each_line_shows_its_estimate_then_turns_in_place_into_its_measured_answer(
        gpu_database_url: str, gpu_timer: FakeTimer, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("COLUMNS", "150"), ("LINES", "50"), ("TERM", "xterm-256color")):
        monkeypatch.setenv(name, value)
    for name in ("TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    terminal, tty = os.openpty()
    shown = bytearray()
    estimate_shown = threading.Event()

    def read_terminal() -> None:
        while True:
            try:
                chunk = os.read(terminal, 65536)
            except OSError:  # EIO: the command's side is closed
                return
            if not chunk:
                return
            shown.extend(chunk)
            if b"estimated" in shown:
                estimate_shown.set()

    # The measurement begins only once the terminal shows the estimate (or a minute has passed, and the test fails).
    measured_after_estimate: list[bool] = []

    def timer_after_estimate(workload: Any, device_index: int = 0) -> Any:
        measured_after_estimate.append(estimate_shown.wait(timeout=60))
        return gpu_timer(workload, device_index)

    monkeypatch.setattr("engine.timing.StepTimer", timer_after_estimate)
    reader = threading.Thread(target=read_terminal)
    reader.start()
    try:
        with open(tty, "w", closefd=False) as out, monkeypatch.context() as on_terminal:
            on_terminal.setattr(sys, "stdout", out)
            on_terminal.setattr(sys, "stderr", out)
            code = typer.main.get_command(cli).main(["predict", "test_vit", "--targets", "t4,rtx3090",
                                                     "--database-url", gpu_database_url], standalone_mode=False)
            out.flush()
    finally:
        os.close(tty)
        reader.join(timeout=30)
        os.close(terminal)

    assert code in (None, 0)
    assert measured_after_estimate == [True]
    screen = terminal_screen(shown.decode())
    rows = [line for line in screen if "NVIDIA Tesla T4" in line or "GeForce RTX 3090" in line]
    assert len(rows) == 2 and all("hostaware@" in line for line in rows)
    assert not any("estimated" in line or "analytic@" in line for line in screen)
    assert sum("on NVIDIA H200" in line for line in screen) == 1


def test_a_compiled_model_is_predicted_faster_than_its_eager_form(database_url: str) -> None:
    eager, compiled = (predict_json(database_url, "resnet18", "rtx-4090", "--mode", "infer", *flag)
                       for flag in ((), ("--compile",)))
    assert compiled["workload"]["compile"] is True and "compile" not in eager["workload"]
    assert compiled["predictions"][0]["latency_ms"] < eager["predictions"][0]["latency_ms"]
