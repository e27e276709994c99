"""The sweep benchmark (issue #6): one workload on 20 targets with the `spec` estimator, measured two ways in one run.

(a) In-process: one fresh process runs one Engine with green contexts; the model is built once and a CUDA graph is
    captured again under each host setting. Each setting's Measurement.wall_s is its own cost.
(b) The paper's way: one fresh `understudy predict` process per target, with MPS and an empty cache of its own.

The clock is emulated in both (UNDERSTUDY_ALLOW_CLOCK_LOCK=false): nothing here changes the GPU's clocks or settings.
Writes sweep.json and sweep.md to --out and prints a short table last. Needs an NVIDIA GPU (the H200 test host):

    source scripts/device_setup.sh && python3 benchmarks/sweep/run.py --out $OUT
    python3 benchmarks/sweep/run.py --targets rtx-3060-12-gb,rtx-4090 --timed-windows 3 --window-ms 20   # smoke test
    python3 benchmarks/sweep/run.py --resume benchmarks/sweep/results/sweep.json --out $OUT   # (b)'s skipped targets
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Small to large, consumer and data-center, every one within the H200's 132 SMs, no two with the same SM count.
TARGETS = (
    "rtx-3050-8-gb-ga106", "gtx-1660-super", "rtx-4060", "rtx-3060-12-gb", "rtx-2060", "rtx-4060-ti-16-gb",
    "rtx-3060-ti-gddr6", "t4", "rtx-3070", "rtx-a4000", "rtx-4070-super", "l4", "rtx-a5000", "rtx-3080-10-gb",
    "a10-pcie", "rtx-4080", "rtx-3090", "a100-sxm4-40-gb", "h100-pcie-80-gb", "rtx-4090",
)
WORKLOAD = {"model": "resnet50", "mode": "train", "precision": "fp32", "batch_size": 16, "resolution": 224,
            "optimizer": "sgd"}
ESTIMATOR = "spec"
ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    args = parse_args()
    targets = [name.strip() for name in args.targets.split(",") if name.strip()]
    if args.in_process_child:
        sys.stdout.write(json.dumps(in_process(targets)) + "\n")
        return 0
    env = {**os.environ, "UNDERSTUDY_ALLOW_CLOCK_LOCK": "false"}
    if args.timed_windows is not None:
        env["UNDERSTUDY_TIMED_WINDOWS"] = str(args.timed_windows)
    if args.window_ms is not None:
        env["UNDERSTUDY_WINDOW_MS"] = str(args.window_ms)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    command = " ".join([Path(sys.executable).name, *sys.argv])
    if args.resume is not None:
        report = json.loads(args.resume.read_text())
        report["command"] = f"{report['command']}; then {command}"
        targets = report["targets"]
    else:
        report = {
            "command": command,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "workload": WORKLOAD,
            "estimator": ESTIMATOR,
            "targets": targets,
            "timed_windows": env.get("UNDERSTUDY_TIMED_WINDOWS", "default (10)"),
            "window_ms": env.get("UNDERSTUDY_WINDOW_MS", "default (50)"),
        }
        print(f"(a) in-process sweep of {len(targets)} targets ...", file=sys.stderr, flush=True)
        report["in_process"] = run_in_process(targets, env, args.process_timeout_s * 4)
        write(report, args.out)
    with tempfile.TemporaryDirectory(prefix="understudy-sweep-") as scratch:
        report["processes"] = run_processes(targets, env, Path(scratch), args, started, report)
    # Across a resumed run's calls: what each call ran.
    report["wall_s"] = round(report.get("wall_s", 0.0) + time.monotonic() - started, 1)
    summarise(report)
    write(report, args.out)
    print_table(report)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated catalog ids (default: the 20)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "sweep" / "results",
                        help="where sweep.json and sweep.md go")
    parser.add_argument("--timed-windows", type=int, help="UNDERSTUDY_TIMED_WINDOWS for both ways (default 10)")
    parser.add_argument("--window-ms", type=float, help="UNDERSTUDY_WINDOW_MS for both ways (default 50)")
    parser.add_argument("--process-timeout-s", type=float, default=90.0,
                        help="limit of one fresh process of (b); (a) gets four times as long")
    parser.add_argument("--budget-s", type=float, default=330.0,
                        help="start no more processes of (b) once the run is this old; the rest are reported skipped")
    parser.add_argument("--resume", type=Path,
                        help="a sweep.json whose (b) the budget cut short: keep its (a) and every process it ran, "
                             "run (b) for the targets it skipped")
    parser.add_argument("--in-process-child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


# (a) one process, one Engine, green contexts ----------------------------------------------------------------------


def in_process(targets: list[str]) -> dict[str, Any]:
    """Runs in the child of (a): the sweep, timed, with each target's result and each setting's cost."""
    started = time.perf_counter()
    from understudy.catalog import resolve_target
    from understudy.settings import get_settings
    from understudy.workload import Workload
    from engine.engine import Engine

    settings = get_settings().model_copy(update={"sm_mechanism": "green-context", "allow_clock_lock": False})
    workload = Workload(**WORKLOAD)
    specs = [resolve_target(name) for name in targets]
    imported = time.perf_counter()
    engine = Engine(settings)
    ready = time.perf_counter()
    results = engine.predict(workload, specs, ESTIMATOR)
    done = time.perf_counter()
    rows, setting_rows = {}, {}
    for spec, result in zip(specs, results, strict=True):
        measurement = result.details.get("measurement", {})
        setting = result.host_setting
        rows[spec.id] = {"status": result.status.value, "latency_ms": result.latency_ms, "error": result.error,
                         "host_setting": setting.describe() if setting else None,
                         "sm_count_given": setting.sm_count if setting else None,
                         "timing_mode": measurement.get("timing_mode"), "host_min_ms": measurement.get("min_ms"),
                         "setting_wall_s": measurement.get("wall_s")}
        if setting is not None:
            entry = setting_rows.setdefault(setting.key, {"setting": setting.describe(), "targets": [],
                                                          "status": measurement.get("status"),
                                                          "wall_s": measurement.get("wall_s")})
            entry["targets"].append(spec.id)
    return {"host": engine.host.model_dump(mode="json"), "import_s": imported - started, "engine_s": ready - imported,
            "predict_s": done - ready, "targets": rows, "settings": list(setting_rows.values())}


def run_in_process(targets: list[str], env: dict[str, str], timeout_s: float) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--in-process-child", "--targets", ",".join(targets)]
    started = time.perf_counter()
    try:
        child = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        return {"status": "failed", "error": f"timed out after {timeout_s:.0f} s", "stderr_tail": tail(exc.stderr)}
    wall_s = time.perf_counter() - started
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        return {"status": "failed", "error": f"exited {child.returncode}", "process_wall_s": wall_s,
                "stderr_tail": tail(child.stderr)}
    return {"status": "done", "process_wall_s": wall_s, **json.loads(lines[-1])}


# (b) one fresh `understudy predict` process per target, MPS --------------------------------------------------------


def run_processes(targets: list[str], env: dict[str, str], scratch: Path, args: argparse.Namespace,
                  started: float, report: dict[str, Any]) -> dict[str, Any]:
    earlier = report.get("processes", {}).get("targets", {})
    rows: dict[str, dict[str, Any]] = {}
    report["processes"] = {"targets": rows}
    for index, target in enumerate(targets):
        if earlier.get(target, {}).get("status", "skipped") != "skipped":
            rows[target] = earlier[target]
            continue
        if time.monotonic() - started > args.budget_s:
            rows[target] = {"status": "skipped", "error": f"the run was past its {args.budget_s:.0f} s budget"}
            continue
        print(f"(b) {index + 1}/{len(targets)} {target} in a fresh process ...", file=sys.stderr, flush=True)
        rows[target] = one_process(target, env, scratch / f"{index:02d}", args.process_timeout_s)
        write(report, args.out)
    walls = [row["wall_s"] for row in rows.values() if "wall_s" in row]
    return {"targets": rows, "total_wall_s": sum(walls), "processes": len(walls)}


def one_process(target: str, env: dict[str, str], folder: Path, timeout_s: float) -> dict[str, Any]:
    folder.mkdir(parents=True)
    command = [sys.executable, "-m", "cli.main", "predict", WORKLOAD["model"], "--targets", target,
               "--mode", WORKLOAD["mode"], "--precision", WORKLOAD["precision"],
               "--batch-size", str(WORKLOAD["batch_size"]), "--resolution", str(WORKLOAD["resolution"]),
               "--optimizer", WORKLOAD["optimizer"], "--estimator", ESTIMATOR, "--sm-mechanism", "mps", "--json"]
    # Its own empty cache, so nothing is served from an earlier process; its own MPS folder, so what a killed one
    # leaves can be found and stopped.
    # (COLUMNS keeps rich from wrapping the CLI's error line.)
    own = {**env, "DATABASE_URL": f"sqlite:///{folder / 'cache.sqlite'}", "UNDERSTUDY_MPS_DIR": str(folder / "mps"),
           "COLUMNS": "400"}
    started = time.perf_counter()
    child = subprocess.Popen(command, env=own, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        out, err = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        _, err = child.communicate()
        release_mps(folder / "mps")
        return {"status": "failed", "error": f"timed out after {timeout_s:.0f} s", "wall_s": timeout_s,
                "stderr_tail": tail(err)}
    wall_s = time.perf_counter() - started
    try:
        (prediction,) = json.loads(out)["predictions"]
    except (ValueError, KeyError, TypeError):
        release_mps(folder / "mps")
        return {"status": "failed", "error": f"exited {child.returncode}: {tail(err, 1) or 'no prediction'}",
                "wall_s": wall_s, "stderr_tail": tail(err)}
    setting = prediction.get("host_setting") or {}
    measurement = prediction.get("details", {}).get("measurement", {})
    return {"status": prediction["status"], "latency_ms": prediction.get("latency_ms"),
            "error": prediction.get("error"), "sm_count_given": setting.get("sm_count"),
            "timing_mode": measurement.get("timing_mode"), "host_min_ms": measurement.get("min_ms"),
            "measurement_wall_s": measurement.get("wall_s"), "wall_s": wall_s}


def release_mps(folder: Path) -> None:
    """What a process that died mid-measurement left: its MPS daemon (its MPS child died with it)."""
    from engine.restrict import quit_mps_daemons

    quit_mps_daemons(folder, os.environ.get("UNDERSTUDY_MPS_CONTROL", "nvidia-cuda-mps-control"))


# The report --------------------------------------------------------------------------------------------------------


def summarise(report: dict[str, Any]) -> None:
    """Per target both latencies and their relative difference; totals, speedup and the per-setting cost of (a)."""
    a, b = report["in_process"], report["processes"]
    a_rows, b_rows = a.get("targets", {}), b["targets"]
    rows = []
    for target in report["targets"]:
        left, right = a_rows.get(target, {}), b_rows.get(target, {})
        la, lb = left.get("latency_ms"), right.get("latency_ms")
        rows.append({"target": target, "in_process": left, "process": right,
                     "relative_difference": (la - lb) / lb if la and lb else None})
    report["rows"] = rows
    settings = a.get("settings", [])
    walls = [s["wall_s"] for s in settings if s.get("wall_s") is not None]
    report["summary"] = {
        "in_process_wall_s": a.get("process_wall_s"),
        "in_process_predict_s": a.get("predict_s"),
        "processes_wall_s": b["total_wall_s"],
        "processes_run": b["processes"],
        # Only over the same work: every target done both ways.
        "speedup": b["total_wall_s"] / a["process_wall_s"]
        if all(r["in_process"].get("status") == r["process"].get("status") == "done" for r in rows) else None,
        "distinct_settings": len(settings),
        "targets_sharing_a_setting": sum(len(s["targets"]) for s in settings if len(s["targets"]) > 1),
        "first_setting_wall_s": walls[0] if walls else None,
        "median_extra_setting_wall_s": statistics.median(walls[1:]) if len(walls) > 1 else None,
        "median_process_wall_s": statistics.median([r["wall_s"] for r in b_rows.values() if "wall_s" in r])
        if b["processes"] else None,
        "median_abs_relative_difference": statistics.median(abs(r["relative_difference"]) for r in rows
                                                            if r["relative_difference"] is not None)
        if any(r["relative_difference"] is not None for r in rows) else None,
    }


def write(report: dict[str, Any], out: Path) -> None:
    """Both files, rewritten after every step so that a run cut short still leaves what it measured."""
    (out / "sweep.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "sweep.md").write_text(markdown(report))


def markdown(report: dict[str, Any]) -> str:
    a, s = report["in_process"], report.get("summary", {})
    host = a.get("host", {})
    lines = [
        "# Sweep: one workload on many targets, in one process vs one process per target",
        "",
        f"{report['date']}, `{report['command']}`.",
        f"Host: {host.get('gpu_name', '?')} ({host.get('sm_count', '?')} SMs), torch {host.get('torch', '?')}, "
        f"timm {host.get('timm', '?')}; clock emulated. Workload: {json.dumps(report['workload'])}, estimator "
        f"`{report['estimator']}`; timed windows {report['timed_windows']}, window {report['window_ms']} ms.",
        "",
    ]
    if a["status"] != "done":
        lines += [f"**(a) failed:** {a.get('error')}", "", "```", a.get("stderr_tail", ""), "```", ""]
    if s:
        lines += [
            f"- (a) in-process, green contexts: {fmt(s['in_process_wall_s'], 's')} for the whole process "
            f"({fmt(s['in_process_predict_s'], 's')} in `Engine.predict`); {s['distinct_settings']} distinct "
            f"settings, {s['targets_sharing_a_setting']} target(s) shared one with another target.",
            f"- (a) cost per setting: {fmt(s['first_setting_wall_s'], 's')} for the first (it builds the model), "
            f"median {fmt(s['median_extra_setting_wall_s'], 's')} for each one after it.",
            f"- (b) one fresh process per target, MPS: {fmt(s['processes_wall_s'], 's')} for "
            f"{s['processes_run']} processes, median {fmt(s['median_process_wall_s'], 's')} each.",
            f"- Speedup (b) / (a), whole processes: {fmt(s['speedup'], 'x')}.",
            f"- Median |(a) - (b)| / (b) of the predicted latency: {pct(s['median_abs_relative_difference'], '')}.",
            "",
        ]
    lines += ["| target | SMs given (a / b) | (a) ms | (b) ms | (a) vs (b) | (a) setting s | (b) process s | "
              "notes |", "|---|---|---|---|---|---|---|---|"]
    for row in report.get("rows", []):
        left, right = row["in_process"], row["process"]
        notes = "; ".join(f"{way}: {r.get('status')} {r.get('error') or ''}".strip() for way, r in
                          (("a", left), ("b", right)) if r.get("status") not in (None, "done"))
        lines.append(f"| {row['target']} | {sms_given(left)} / {sms_given(right)} | {fmt(left.get('latency_ms'))} | "
                     f"{fmt(right.get('latency_ms'))} | "
                     f"{pct(row['relative_difference'])} | {fmt(left.get('setting_wall_s'))} | "
                     f"{fmt(right.get('wall_s'))} | {notes} |")
    return "\n".join(lines) + "\n"


def print_table(report: dict[str, Any]) -> None:
    s = report["summary"]
    print(f"{'target':<22}{'(a) ms':>9}{'(b) ms':>9}{'diff':>8}{'(a) s':>7}{'(b) s':>7}")
    for row in report["rows"]:
        left, right = row["in_process"], row["process"]
        print(f"{row['target']:<22}{fmt(left.get('latency_ms')):>9}{fmt(right.get('latency_ms')):>9}"
              f"{pct(row['relative_difference']):>8}{fmt(left.get('setting_wall_s'), '', 1):>7}"
              f"{fmt(right.get('wall_s'), '', 1):>7}")
    print(f"total wall: (a) {fmt(s['in_process_wall_s'], 's', 1)}, (b) {fmt(s['processes_wall_s'], 's', 1)}; "
          f"speedup {fmt(s['speedup'], 'x', 1)}; (a) per extra setting {fmt(s['median_extra_setting_wall_s'], 's')}")


def sms_given(row: dict[str, Any]) -> str:
    if row.get("status") != "done":
        return "-"
    return str(row.get("sm_count_given") or "all")


def fmt(value: float | None, unit: str = "", digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}{(' ' + unit) if unit == 's' else unit}"


def pct(value: float | None, sign: str = "+") -> str:
    return "-" if value is None else f"{100 * value:{sign}.1f} %"


def tail(text: str | bytes | None, lines: int = 8) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join((text or "").strip().splitlines()[-lines:])


if __name__ == "__main__":
    sys.exit(main())
