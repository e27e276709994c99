"""The `understudy` command line: predict in-process (SQLite cache), list targets, and run the service parts."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from understudy.bands import DEFAULT_COVERAGE, check_coverage
from understudy.catalog import catalog, resolve_target
from understudy.errors import UnderstudyError
from understudy.results import PredictionResult, Status
from understudy.settings import get_settings
from cli.terminal import Command, Group, Refining, Steps, failure_lines, third_party_warnings

if TYPE_CHECKING:
    from understudy.catalog import TargetSpec
    from understudy.results import HostInfo
    from understudy.workload import Workload
    from cli.local import Answer

# Rows of a ground-truth file that cannot be read, listed by `evaluate` before it goes on without them.
SKIPPED_ROWS_SHOWN = 10

cli = typer.Typer(cls=Group, add_completion=False, no_args_is_help=True, help=__doc__)
console = Console(stderr=True)


def _fail(message: str) -> NoReturn:
    console.print(f"[red]error:[/red] {message}")
    raise typer.Exit(2)


def _read_json(path: Path, what: str) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        _fail(f"cannot read the {what} file: {exc}")


@cli.command(cls=Command)
def predict(
    model: Annotated[str, typer.Argument(help="a timm model name")],
    targets: Annotated[str, typer.Option("--targets", "-t", help="comma-separated catalog ids or names, each with an "
                                         "optional power limit (rtx4090@300w)")] = "",
    target_spec: Annotated[Optional[Path], typer.Option(
        "--target-spec",
        help='a JSON file of a GPU the catalog lacks, or a list of them, as the API takes inline targets: {"name": '
             '"RTX 4090 Laptop", "sm_count": 76, "boost_clock_mhz": 2040, "memory_bandwidth_gbps": 576, '
             '"memory_size_gb": 16, "gpu_chip": "AD103", "tdp_w": 150}',
    )] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", "-b")] = 32,
    resolution: Annotated[int, typer.Option("--resolution", "-r")] = 224,
    precision: Annotated[str, typer.Option(help="fp32|amp-fp16|amp-bf16|fp16|bf16")] = "amp-fp16",
    mode: Annotated[str, typer.Option(help="train|infer")] = "train",
    optimizer: Annotated[str, typer.Option(help="none|sgd|sgd-nesterov|adamw")] = "sgd",
    memory_format: Annotated[str, typer.Option("--memory-format", help="nchw|nhwc")] = "nchw",
    torch_major: Annotated[int, typer.Option("--torch-major", help="2, or 1 for a target on PyTorch 1.x (attention "
                                             "unfused, optimizers stepping one weight at a time)")] = 2,
    reparam: Annotated[bool, typer.Option("--reparam", help="inference of the deployed form: train-time branches "
                                          "folded into the convolutions (timm.utils.reparameterize_model)")] = False,
    compile_model: Annotated[bool, typer.Option("--compile", help="the model compiled with torch.compile (inductor, "
                                                "default mode); compile time is not in the step time")] = False,
    estimator: Annotated[Optional[str], typer.Option(help="spec|flops|analytic|hostaware|calibrated")] = None,
    calibration: Annotated[Optional[Path], typer.Option(
        help='for --estimator calibrated: a JSON file {"<target>": {"points": [{"workload": {...}, '
             '"measured_ms": 12.3}, ...], "base_estimator": "analytic"}, ...} of measured step times per target',
    )] = None,
    sm_mechanism: Annotated[Optional[str], typer.Option(help="green-context|mps (spec estimator)")] = None,
    gpu: Annotated[int, typer.Option(help="GPU index")] = 0,
    coverage: Annotated[float, typer.Option(help="the share of measured step times the interval beside each "
                                                 "prediction is meant to hold, 0.5 to 0.95")] = DEFAULT_COVERAGE,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="where the estimator measures on this GPU: wait "
                                       "for its answers (on a terminal, analytic estimates show meanwhile), or print "
                                       "the estimates alone and measure nothing")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="give failures' reasons whole, and other "
                                                                  "packages' warnings")] = False,
    database_url: Annotated[Optional[str], typer.Option(envvar="DATABASE_URL", help="cache database")] = None,
) -> None:
    """Predict MODEL's step time on each target, measuring on this machine's GPU (or counting, without one).

    Each time comes with the interval where `--coverage` of measured times fall, and each target with whether the
    workload fits its memory (fits, tight: it may or may not, oom). Exits 0 when every target has its answer (a
    workload that does not fit is an answer: oom), 1 when any target failed, 2 when the request itself is wrong.

    Measuring takes seconds, so on a terminal the table first shows the analytic estimate of each target the cache
    lacks, and each line is updated in place as its measured answer lands; --no-wait prints the estimates alone."""
    from pydantic import ValidationError

    from understudy.calibration import CalibrationSet
    from understudy.catalog import InlineTarget
    from understudy.workload import Workload
    from cli.local import Answer, LocalPredictor

    try:
        check_coverage(coverage)
    except ValueError as exc:
        _fail(f"--coverage: {exc}")
    settings = get_settings()
    if sm_mechanism:
        settings = settings.model_copy(update={"sm_mechanism": sm_mechanism})
    try:
        workload = Workload(model=model, mode=mode, batch_size=batch_size, resolution=resolution,
                            precision=precision, optimizer=optimizer, memory_format=memory_format,
                            torch_major=torch_major, reparam=reparam, compile=compile_model)
        specs = [resolve_target(name.strip()) for name in targets.split(",") if name.strip()]
        if target_spec is not None:
            given = _read_json(target_spec, "target spec")
            specs += [InlineTarget.model_validate(item).to_spec() for item in
                      (given if isinstance(given, list) else [given])]
        if not specs:
            _fail("no targets: name at least one, e.g. --targets rtx3060,t4 (`understudy targets` lists them), or "
                  "describe one with --target-spec")
        calibrations = None
        if calibration is not None:
            given = _read_json(calibration, "calibration")
            if not isinstance(given, dict):
                _fail(f"{calibration}: expected an object of calibrations by target")
            calibrations = {resolve_target(name).id: CalibrationSet.model_validate(points)
                            for name, points in given.items()}
        screen = Console()
        started = time.monotonic()
        with third_party_warnings(verbose):
            with Steps(console) as steps:
                steps("looking up the cache")
                local = LocalPredictor(settings, database_url or settings.database_url, gpu_index=gpu)
                seen = local.seen_host
                if not seen.has_gpu and estimator is None:
                    console.print(f"[yellow]{seen.note}[/yellow]; using the analytic estimator")
                # Estimates are worth computing only where someone sees them before the measured answers.
                early = (local.estimates(workload, specs, estimator, steps, calibrations)
                         if not wait or (screen.is_terminal and not as_json) else None)
                estimated_s = time.monotonic() - started
                answers = early if early is not None else [
                    Answer(result, cached)
                    for result, cached in local.predict(workload, specs, estimator, steps, calibrations)]
            if early is not None and wait:
                with Refining(screen, _table(workload, seen, specs, early, coverage, screen.width),
                              f"measuring on {seen.gpu_name}") as refining:
                    answers = [Answer(result, cached) for result, cached in
                               local.predict(workload, specs, estimator, refining, calibrations)]
                    refining.show(_table(workload, local.host, specs, answers, coverage, screen.width))
            # A table of estimates alone names the GPU as NVML does: probing it would only add CUDA's start. JSON
            # records the probed host.
            host = seen if early is not None and not wait and not as_json else local.host
    except ValidationError as exc:
        _fail("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
    except UnderstudyError as exc:
        _fail(str(exc))
    failed = any(answer.result.status == Status.failed for answer in answers)
    if as_json:
        out = [{**answer.result.model_dump(mode="json"), "interval_ms": answer.result.interval_ms(coverage),
                "coverage": coverage, "target_name": spec.name, "cached": answer.cached,
                "answer": "estimate" if answer.estimate else "final"}
               for spec, answer in zip(specs, answers, strict=True)]
        sys.stdout.write(json.dumps({"workload": workload.canonical(), "host": host.model_dump(mode="json"),
                                     "predictions": out}, indent=2) + "\n")
        raise typer.Exit(1 if failed else 0)
    if early is None or not wait:
        screen.print(_table(workload, host, specs, answers, coverage, screen.width))
    for line in failure_lines([(spec.name, answer.result) for spec, answer in zip(specs, answers, strict=True)],
                              verbose):
        console.print(line, markup=False, highlight=False)
    if verbose and early is not None:
        measured = f", measured answers after {time.monotonic() - started:.1f} s" if wait else ""
        console.print(f"[dim]estimates after {estimated_s:.1f} s{measured}[/dim]")
    if failed:
        if not verbose:
            console.print("[dim]the whole reasons: -v, or --json[/dim]")
        raise typer.Exit(1)


def _table(workload: Workload, host: HostInfo, specs: list[TargetSpec], answers: list[Answer], coverage: float,
           width: int) -> Table:
    """The answers as a table; an estimate's line is dim, and the caption says what an estimate is. The numbers are
    never cut: on a narrow terminal the words around them wrap, and below 110 columns the host setting is left out
    (`--json` has everything)."""
    wide = width >= 110
    caption = (f"predicted ms (low-high): {coverage:.0%} of measured times fall inside; memory: fits, tight (it may "
               "or may not fit) or oom")
    if any(answer.estimate for answer in answers):
        caption += "; estimated: the analytic roofline's answer and band, counted without the GPU"
    table = Table(title=f"{workload.label} on {host.gpu_name or 'no GPU'}", caption=caption)
    memory = [answer.result.memory.describe() if answer.result.memory else "-" for answer in answers]
    longest_word = max(len(word) for text in memory for word in text.split())
    for column in ("target", "predicted ms", "samples/s", "memory", *(["host setting"] if wide else []),
                   "estimator", "answer"):
        table.add_column(column, justify="right" if column in ("predicted ms", "samples/s") else "left",
                         no_wrap=column in ("predicted ms", "samples/s") or (wide and column == "memory"),
                         min_width=longest_word if column == "memory" else None, overflow="fold")
    for spec, answer, fit in zip(specs, answers, memory, strict=True):
        result = answer.result
        rate = f"{result.samples_per_s:.0f}" if result.samples_per_s else "-"
        counted = "counted, not run" if host.has_gpu else "no GPU (counted)"
        setting = [result.host_setting.describe() if result.host_setting else counted] if wide else []
        how = "estimated" if answer.estimate else "cached" if answer.cached else ""
        table.add_row(spec.name, _predicted_ms(result, coverage), rate, fit, *setting,
                      f"{result.estimator}@{result.estimator_version}", how, style="dim" if answer.estimate else None)
    return table


def _ms(value: float) -> str:
    return f"{value:.1f}" if value >= 100 else f"{value:.2f}"


def _predicted_ms(result: PredictionResult, coverage: float) -> str:
    """'12.30 (10.90-14.10)': the step time and its interval; the status where there is no time."""
    if not result.latency_ms:
        return result.status.value
    interval = result.interval_ms(coverage)
    return _ms(result.latency_ms) + (f" ({_ms(interval[0])}-{_ms(interval[1])})" if interval else "")


@cli.command(cls=Command)
def targets(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the target catalog: pass an id (or a name) to --targets."""
    specs = list(catalog())
    if as_json:
        sys.stdout.write(json.dumps([s.model_dump(mode="json") for s in specs], indent=2) + "\n")
        return
    # Ids are what a user types, so they are never cut: the name wraps instead, and below 110 columns the
    # architecture is left out (`--json` has everything).
    out = Console()
    wide = out.width >= 110
    table = Table(title=f"{len(specs)} targets", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("id", no_wrap=True, min_width=max(len(s.id) for s in specs))
    table.add_column("name", ratio=1, overflow="fold")
    if wide:
        table.add_column("architecture", no_wrap=True)
    for column in ("SMs", "MHz", *(["held", "tensor", "W"] if wide else []), "GB", "GB/s", "FP32", "FP16TC"):
        table.add_column(column, justify="right", no_wrap=True)
    for s in specs:
        power = [f"{s.sustained_clock():.0f}", f"{s.tensor_clock('amp-fp16'):.0f}",
                 f"{s.tdp_w:g}" if s.tdp_w else "-"] if wide else []
        table.add_row(s.id, s.name, *([s.architecture] if wide else []), str(s.sm_count), f"{s.boost_clock_mhz:g}",
                      *power, f"{s.memory_size_gb:g}", f"{s.memory_bandwidth_gbps:g}", f"{s.fp32_tflops:g}",
                      f"{s.fp16_tensor_tflops:g}")
    out.print(table)
    console.print("[dim]MHz: boost clock" + ("; held: the clock held under load at W, the rated TDP; tensor: "
                                             "the clock held while the fp16 tensor cores run at full rate" if wide
                                             else "")
                  + "; FP32, FP16TC: peak TFLOPS, FP16 on tensor cores; another power limit: <id>@<W>w[/dim]")


@cli.command(cls=Command)
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
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="show other packages' warnings")] = False,
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
    skipped: list[str] = []
    plans = plan_sample(read_rows(files, max_measured_ms, skipped), sample, seed)
    if skipped:
        shown = skipped[:SKIPPED_ROWS_SHOWN]
        console.print(f"[yellow]skipped {len(skipped)} row(s) that cannot be read:[/yellow]")
        for line in shown:
            console.print(f"  {line}", markup=False, highlight=False)
        if len(skipped) > len(shown):
            console.print(f"  ... and {len(skipped) - len(shown)} more")
    if shard:
        try:
            plans = take_shard(plans, shard)
        except ValueError as exc:
            _fail(str(exc))
    if measured_only:
        plans = [plan for plan in plans if measured_on_host(measurement_log, engine.host, plan)]
    started = time.monotonic()
    if measure_only:
        with third_party_warnings(verbose), Steps(console, total=len(plans)) as steps:
            count = record(engine, plans, names, budget_s, progress=steps, timeout_s=workload_timeout_s)
        console.print(f"{count} of {len(plans)} workloads are in {measurement_log.path}")
        return
    with third_party_warnings(verbose), Steps(console, total=len(plans)) as steps:
        rows = run_evaluation(engine, plans, names, budget_s, progress=steps)
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
