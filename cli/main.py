"""The `understudy` command line: predict in-process (SQLite cache), list targets, and run the service parts."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from understudy.catalog import catalog, resolve_target
from understudy.errors import UnderstudyError
from understudy.settings import get_settings

cli = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
console = Console(stderr=True)


def _fail(message: str) -> None:
    console.print(f"[red]error:[/red] {message}")
    raise typer.Exit(2)


@cli.command()
def predict(
    model: Annotated[str, typer.Argument(help="a timm model name")],
    targets: Annotated[str, typer.Option("--targets", "-t", help="comma-separated catalog ids or names")],
    batch_size: Annotated[int, typer.Option("--batch-size", "-b")] = 32,
    resolution: Annotated[int, typer.Option("--resolution", "-r")] = 224,
    precision: Annotated[str, typer.Option(help="fp32|amp-fp16|amp-bf16|fp16|bf16")] = "amp-fp16",
    mode: Annotated[str, typer.Option(help="train|infer")] = "train",
    optimizer: Annotated[str, typer.Option(help="none|sgd|sgd-nesterov|adamw")] = "sgd",
    memory_format: Annotated[str, typer.Option("--memory-format", help="nchw|nhwc")] = "nchw",
    estimator: Annotated[Optional[str], typer.Option(help="spec|flops|analytic|hostaware|calibrated")] = None,
    calibration: Annotated[Optional[Path], typer.Option(
        help='for --estimator calibrated: a JSON file {"<target>": {"points": [{"workload": {...}, '
             '"measured_ms": 12.3}, ...], "base_estimator": "analytic"}, ...} of measured step times per target',
    )] = None,
    sm_mechanism: Annotated[Optional[str], typer.Option(help="green-context|mps (spec estimator)")] = None,
    gpu: Annotated[int, typer.Option(help="GPU index")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
    database_url: Annotated[Optional[str], typer.Option(envvar="DATABASE_URL", help="cache database")] = None,
) -> None:
    """Predict MODEL's step time on each target, measuring on this machine's GPU (or counting, without one)."""
    from pydantic import ValidationError

    from understudy.calibration import CalibrationSet
    from ledger.db import init_sqlite
    from understudy.workload import Workload
    from engine.engine import Engine
    from cli.local import predict_cached

    settings = get_settings()
    if sm_mechanism:
        settings = settings.model_copy(update={"sm_mechanism": sm_mechanism})
    try:
        workload = Workload(model=model, mode=mode, batch_size=batch_size, resolution=resolution,
                            precision=precision, optimizer=optimizer, memory_format=memory_format)
        specs = [resolve_target(name.strip()) for name in targets.split(",") if name.strip()]
        calibrations = None
        if calibration is not None:
            given = json.loads(calibration.read_text())
            if not isinstance(given, dict):
                _fail(f"{calibration}: expected an object of calibrations by target")
            calibrations = {resolve_target(name).id: CalibrationSet.model_validate(points)
                            for name, points in given.items()}
        engine = Engine(settings, gpu_index=gpu)
        if not engine.host.has_gpu and estimator is None:
            console.print(f"[yellow]{engine.host.note}[/yellow]; using the analytic estimator")
        db = init_sqlite(database_url or settings.database_url)
        with console.status("predicting...") as status:
            rows = predict_cached(engine, db, workload, specs, estimator,
                                  progress=lambda text: status.update(text), calibrations=calibrations)
    except ValidationError as exc:
        _fail("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
        return
    except UnderstudyError as exc:
        _fail(str(exc))
        return
    except (OSError, json.JSONDecodeError) as exc:
        _fail(f"cannot read the calibration file: {exc}")
        return
    if as_json:
        out = [{**result.model_dump(mode="json"), "cached": cached} for result, cached in rows]
        sys.stdout.write(json.dumps({"workload": workload.canonical(), "host": engine.host.model_dump(mode="json"),
                                     "predictions": out}, indent=2) + "\n")
        return
    table = Table(title=f"{workload.label} on {engine.host.gpu_name or 'no GPU'}")
    for column in ("target", "predicted ms", "samples/s", "host setting", "oom", "estimator", "cached"):
        table.add_column(column)
    for spec, (result, cached) in zip(specs, rows, strict=True):
        latency = f"{result.latency_ms:.2f}" if result.latency_ms else (result.error or result.status.value)
        rate = f"{result.samples_per_s:.0f}" if result.samples_per_s else "-"
        setting = result.host_setting.describe() if result.host_setting else "no GPU (counted)"
        table.add_row(spec.name, latency, rate, setting, "yes" if result.status == "oom" else "",
                      f"{result.estimator}@{result.estimator_version}", "yes" if cached else "")
    Console().print(table)


@cli.command()
def targets(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the target catalog."""
    specs = list(catalog())
    if as_json:
        sys.stdout.write(json.dumps([s.model_dump(mode="json") for s in specs], indent=2) + "\n")
        return
    table = Table(title=f"{len(specs)} targets")
    for column in ("id", "name", "arch", "SMs", "boost MHz", "GB", "GB/s", "FP32 TF", "FP16 tensor TF"):
        table.add_column(column)
    for s in specs:
        table.add_row(s.id, s.name, s.architecture, str(s.sm_count), f"{s.boost_clock_mhz:g}", f"{s.memory_size_gb:g}",
                      f"{s.memory_bandwidth_gbps:g}", f"{s.fp32_tflops:g}", f"{s.fp16_tensor_tflops:g}")
    Console().print(table)


@cli.command()
def evaluate(
    files: Annotated[list[Path], typer.Argument(help="ground-truth CSV files (../shared/groundtruth format)")],
    out: Annotated[Path, typer.Option("--out", help="report folder")],
    estimators: Annotated[str, typer.Option(help="comma-separated estimators")] = "spec,flops,hostaware,analytic",
    sample: Annotated[Optional[int], typer.Option(help="workloads per mode (most targets first, then random)")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    max_measured_ms: Annotated[Optional[float], typer.Option(help="leave out rows slower than this")] = None,
    log: Annotated[Optional[Path], typer.Option(help="measurement log (default OUT/measurements.jsonl)")] = None,
    replay: Annotated[bool, typer.Option(help="measure nothing: take every measurement from the log")] = False,
    budget_s: Annotated[Optional[float], typer.Option(help="stop measuring new workloads after this long")] = None,
    measured_only: Annotated[bool, typer.Option(help="keep only workloads whose unrestricted host measurement is "
                                                     "in the log")] = False,
    measure_only: Annotated[bool, typer.Option(help="only record host measurements into the log (on the GPU host); "
                                                    "score them later with --replay")] = False,
    workload_timeout_s: Annotated[Optional[float], typer.Option(
        help="with --measure-only: measure in a child process and give up on a workload after this long, logging "
             "it as failed")] = None,
    shard: Annotated[Optional[str], typer.Option(help="K/N: evaluate every N-th sampled workload from the K-th "
                                                     "(0-based), so N processes on N GPUs share one sample")] = None,
    gpu: Annotated[int, typer.Option(help="GPU index")] = 0,
) -> None:
    """Score estimators against measured latencies: markdown + JSON report and a log-log plot in OUT."""
    from evaluation.report import build_report, write_report
    from engine.engine import Engine
    from evaluation.evaluate import evaluate as run_evaluation
    from evaluation.evaluate import measured_on_host, plan_sample, read_rows, take_shard
    from evaluation.recording import record
    from engine.measurement_log import MeasurementLog

    names = [name.strip() for name in estimators.split(",") if name.strip()]
    if workload_timeout_s is not None and not measure_only:
        _fail("--workload-timeout-s limits the measuring of --measure-only; add --measure-only (and score the log "
              "later with --replay)")
        return
    measurement_log = MeasurementLog(log or out / "measurements.jsonl")
    try:
        engine = Engine(get_settings(), gpu_index=gpu, log=measurement_log, replay_only=replay)
        for name in names:
            engine.estimator(name)
    except (UnderstudyError, ValueError) as exc:
        _fail(str(exc))
        return
    plans = plan_sample(read_rows(files, max_measured_ms), sample, seed)
    if shard:
        try:
            plans = take_shard(plans, shard)
        except ValueError as exc:
            _fail(str(exc))
            return
    if measured_only:
        plans = [plan for plan in plans if measured_on_host(measurement_log, engine.host, plan)]
    started = time.monotonic()
    if measure_only:
        with console.status("measuring...") as status:
            count = record(engine, plans, names, budget_s, progress=lambda text: status.update(text),
                           timeout_s=workload_timeout_s)
        console.print(f"{count} of {len(plans)} workloads are in {measurement_log.path}")
        return
    with console.status("evaluating...") as status:
        rows = run_evaluation(engine, plans, names, budget_s, progress=lambda text: status.update(text))
    meta = {
        "command": "understudy " + " ".join(sys.argv[1:]),
        "files": [str(f) for f in files],
        "estimators": names,
        "sample_workloads_per_mode": sample,
        "seed": seed,
        "max_measured_ms": max_measured_ms,
        "replay": replay,
        "measured_only": measured_only,
        "shard": shard,
        "host": engine.host.model_dump(mode="json"),
        "wall_s": round(time.monotonic() - started, 1),
    }
    report = build_report(rows, names, meta)
    for path in write_report(report, rows, names, out):
        console.print(f"wrote {path}")


def main() -> None:
    from cli.service import register

    register(cli)
    cli()


if __name__ == "__main__":
    main()
