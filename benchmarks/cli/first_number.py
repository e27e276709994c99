"""How soon a user sees a number, on the GPU test host: the CLI's first estimate, and a warm worker's measurements.

Two measurements, written as JSON and markdown to --out (`first-number.json`, `first-number.md`):

- `screen`: `understudy predict MODEL --targets <ten GPUs>` on a terminal (a pty), a fresh process with an empty cache
  for a workload never predicted before. The seconds from the command's start until the first predicted time is on
  the screen (the estimate, while the GPU measures), and until the command ends with every target measured.
- `worker`: what the service's worker does in its warm measuring process (worker.measuring): warm up once
  (worker.tasks.warm_up: torch, the engine, CUDA and the math libraries), then measure one workload after another
  for ten targets, each new to the process, through the engine the process keeps (worker.tasks.engine_for).

Both run after predict_wall's warm-up (Python's bytecode written, CUDA libraries read), as on a machine whose
packages pip installed.

    source scripts/device_setup.sh && python3 -m benchmarks.cli.first_number --out $OUT

Without a GPU, `--screen-only` times the command alone: its first number is then its whole (analytic) answer.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.cli.predict_wall import CLI_MODULE, FIRST_TARGETS, ROOT, warm_up
from understudy.workload import Workload
from engine.count_table import installed_timm, shipped_table, shipped_counts
from engine.probe import load_nvml, nvml_view

SCREEN_WORKLOADS = (
    ["resnet50", "--mode", "train", "--batch-size", "64"],
    ["convnext_tiny", "--mode", "train", "--batch-size", "64"],
    ["vit_base_patch16_224", "--mode", "infer", "--batch-size", "64"],
    ["efficientnet_b0", "--mode", "infer", "--batch-size", "64"],
    # Read from its amp-fp16 entry (engine.count_table's bf16 twin).
    ["resnet50", "--mode", "train", "--batch-size", "64", "--precision", "amp-bf16"],
    # An amp-bf16 entry of its own (depthwise convolutions).
    ["efficientnet_b0", "--mode", "infer", "--batch-size", "64", "--precision", "amp-bf16"],
    # An fp32 entry of its own.
    ["resnet50", "--mode", "train", "--batch-size", "64", "--precision", "fp32"],
    # A channels-last entry of its own.
    ["resnet50", "--mode", "train", "--batch-size", "64", "--memory-format", "nhwc"],
    # An fp32 channels-last entry of its own.
    ["resnet50", "--mode", "train", "--batch-size", "64", "--precision", "fp32", "--memory-format", "nhwc"],
    # Not in the shipped count table (it holds 224 px and the model's own input size): its estimate waits for torch
    # and a trace.
    ["resnet50", "--mode", "train", "--batch-size", "64", "--resolution", "320"],
)
# Other workloads than the screen's, so that each is new to the measuring process.
WORKER_WORKLOADS = (
    {"model": "resnet34", "mode": "train", "batch_size": 64},
    {"model": "regnety_016", "mode": "train", "batch_size": 64},
    {"model": "deit_small_patch16_224", "mode": "infer", "batch_size": 64},
    {"model": "mobilenetv3_large_100", "mode": "train", "batch_size": 64},
    {"model": "convnext_small", "mode": "infer", "batch_size": 64},
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]")
# A predicted time with its interval, as the table prints it: "81.70 (70.16-93.18)".
NUMBER = re.compile(r"\d+\.\d+ \(\d+(\.\d+)?-\d+(\.\d+)?\)")


def on_screen(workload: list[str], scratch: Path, timeout_s: float = 300.0) -> dict[str, Any]:
    """Run one prediction on a pty: seconds until a predicted time is first on screen, and until the command ends."""
    env = {**os.environ, "UNDERSTUDY_CACHE_DIR": str(scratch / "cache"), "COLUMNS": "200", "LINES": "50",
           "TERM": "xterm-256color", "DATABASE_URL": f"sqlite:///{scratch / 'predictions.sqlite'}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", CLI_MODULE, "predict", *workload, "--targets", ",".join(FIRST_TARGETS)]
    main, child = pty.openpty()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdin=child, stdout=child, stderr=child, env=env, cwd=ROOT,
                               close_fds=True)
    os.close(child)
    seen, first_number = b"", None
    while time.perf_counter() - started < timeout_s:
        ready, _, _ = select.select([main], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the pty closes when the command ends
                break
            if not chunk:
                break
            seen += chunk
            if first_number is None and NUMBER.search(ANSI.sub("", seen.decode(errors="replace"))):
                first_number = time.perf_counter() - started
        elif process.poll() is not None:
            break
    code = process.wait(timeout=30)
    ended = time.perf_counter() - started
    os.close(main)
    text = ANSI.sub("", seen.decode(errors="replace"))
    return {"workload": " ".join(workload), "in_count_table": in_count_table(workload),
            "first_number_s": round(first_number, 3) if first_number else None,
            "done_s": round(ended, 3), "exit_code": code, "estimated_shown": "estimated" in text,
            "last_lines": text.strip().splitlines()[-16:]}


def in_count_table(arguments: list[str]) -> bool:
    """Whether the shipped count table holds the workload of these `predict` arguments (so its estimate needs no
    torch)."""
    options = dict(zip(arguments[1::2], arguments[2::2], strict=True))
    workload = Workload(model=arguments[0], mode=options.get("--mode", "train"),
                        batch_size=int(options.get("--batch-size", "32")),
                        precision=options.get("--precision", "amp-fp16"),
                        memory_format=options.get("--memory-format", "nchw"),
                        resolution=int(options.get("--resolution", "224")))
    return shipped_counts(workload) is not None


def depthwise_warm_up() -> float:
    """Depthwise convolutions (groups = channels), forward and backward, in the AMP precisions and fp32, with the
    filters and strides timm's depthwise models use, under the search setting the engine will measure with: whether
    paying cuDNN's run-time compiled plans for them once, before any workload, spares each new workload its own.
    Returns its seconds."""
    import torch

    from understudy.settings import get_settings

    started = time.perf_counter()
    torch.backends.cudnn.benchmark = get_settings().cudnn_benchmark
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for size in (3, 5, 7):
            for stride in (1, 2):
                x = torch.randn(8, 32, 28, 28, device="cuda", dtype=dtype, requires_grad=True)
                w = torch.randn(32, 1, size, size, device="cuda", dtype=dtype, requires_grad=True)
                out = torch.nn.functional.conv2d(x, w, stride=stride, padding=size // 2, groups=32)
                out.float().sum().backward()
    torch.cuda.synchronize()
    return round(time.perf_counter() - started, 3)


def worker_child(workloads: list[dict[str, Any]], depthwise: bool = False) -> dict[str, Any]:
    """In a process of its own, as the worker's measuring process: warm up (with `depthwise`, depthwise_warm_up
    too), then one workload after another."""
    started = time.perf_counter()
    from understudy.catalog import resolve_target
    from worker.tasks import engine_for, warm_up as warm_measuring_process

    warm_measuring_process()
    report: dict[str, Any] = {"warm_up_s": round(time.perf_counter() - started, 3), "workloads": []}
    if depthwise:
        report["depthwise_warm_up_s"] = depthwise_warm_up()
    targets = [resolve_target(name) for name in FIRST_TARGETS]
    engine = engine_for(0)
    for spec in workloads:
        workload = Workload.model_validate(spec)
        began = time.perf_counter()
        results = engine.predict(workload, targets, "hostaware")
        report["workloads"].append({"workload": workload.label, "seconds": round(time.perf_counter() - began, 3),
                                    "statuses": sorted({r.status.value for r in results}),
                                    "errors": sorted({r.error for r in results if r.error}),
                                    # the measurement's own wall time (build, warm-up, timed windows, profile)
                                    "measurement_s": max((r.details.get("measurement", {}).get("wall_s") or 0.0
                                                          for r in results), default=None),
                                    # the host's own step: what the measurement's timed part scales with
                                    "host_step_ms": max((r.details.get("measurement", {}).get("median_ms") or 0.0
                                                         for r in results), default=None),
                                    "rtx3090_ms": next((round(r.latency_ms, 2) for r in results
                                                        if r.target_id == "rtx-3090" and r.latency_ms), None)})
        print(json.dumps(report["workloads"][-1]), file=sys.stderr, flush=True)
    return report


def worker_report() -> dict[str, Any]:
    """The measuring process's report, from a process of its own (or what it printed when it failed)."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.cli.first_number", "--child"], capture_output=True,
                          text=True, cwd=ROOT, timeout=600, check=False)
    sys.stderr.write(done.stderr[-3000:])
    try:
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"error": done.stderr[-2000:]}


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# How soon a number is on screen ({report['date']}, {report.get('gpu', 'GPU not recorded')}, "
             f"{report['machine']})", "",
             f"`{report['command']}`", "",
             f"import torch, timm: {report['import_torch_timm_before_s']} s before the warm-up, "
             f"{report['import_torch_timm_after_s']} s after. timm {report.get('timm')}; the shipped count table "
             f"{'is' if report.get('count_table') else 'is not'} used.", "",
             "## `understudy predict` on a terminal, ten targets, a workload new to the machine", "",
             "| workload | in the count table | first number on screen (s) | command ended, every target answered (s) "
             "| estimate shown | exit |",
             "|---|---|---|---|---|---|"]
    for row in report.get("screen", []):
        lines.append(f"| {row['workload']} | {row.get('in_count_table')} | {row['first_number_s']} | {row['done_s']} "
                     f"| {row['estimated_shown']} | {row['exit_code']} |")
    if "worker" not in report:
        return "\n".join(lines) + "\n"
    worker = report["worker"]
    lines += ["", "## The worker's warm measuring process, ten targets per workload", "",
              f"Warm-up (once per process): {worker.get('warm_up_s')} s.", "",
              "| order | workload | predicted in (s) | of which the measurement (s) | statuses | RTX 3090 ms |",
              "|---|---|---|---|---|---|"]
    for index, row in enumerate(worker.get("workloads", []), 1):
        lines.append(f"| {index} | {row['workload']} | {row['seconds']} | {row.get('measurement_s')} "
                     f"| {', '.join(row['statuses'])} | {row['rtx3090_ms']} |")
    for row in worker.get("workloads", []):
        lines.extend(f"- {row['workload']}: {error}" for error in row.get("errors", []))
    if worker.get("error"):
        lines += ["", "```", worker["error"], "```"]
    return "\n".join(lines) + "\n"


def gpu_name() -> str:
    """The GPU the run measures on, as NVML names it (the device tool may lend another card than asked)."""
    seen = nvml_view(0, load_nvml())
    return seen.gpu_name or seen.note or "no GPU"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "cli" / "results")
    parser.add_argument("--screen-only", action="store_true",
                        help="time the command alone (on a machine without a GPU there is no measuring process)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workloads", type=Path,
                        help="with --child: the workloads to measure, a JSON list (default: the five above)")
    parser.add_argument("--depthwise-warm-up", action="store_true",
                        help="with --child: run depthwise convolutions after the warm-up (depthwise_warm_up)")
    args = parser.parse_args()
    if args.child:
        workloads = json.loads(args.workloads.read_text()) if args.workloads else list(WORKER_WORKLOADS)
        sys.stdout.write("\n" + json.dumps(worker_child(workloads, args.depthwise_warm_up)) + "\n")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    settings = [f"{name}={value}" for name, value in sorted(os.environ.items()) if name.startswith("UNDERSTUDY_")]
    report: dict[str, Any] = {"command": " ".join([*settings, "python3 -m benchmarks.cli.first_number",
                                                   *sys.argv[1:]]),
                              "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                              "machine": f"{os.cpu_count()} cores, {os.uname().nodename}", "gpu": gpu_name(),
                              "timm": installed_timm(), "count_table": shipped_table() is not None}
    report.update(warm_up())

    def save() -> None:
        (args.out / "first-number.json").write_text(json.dumps(report, indent=2) + "\n")
        (args.out / "first-number.md").write_text(markdown(report))

    report["screen"] = []
    for workload in SCREEN_WORKLOADS:
        with tempfile.TemporaryDirectory(prefix="understudy-screen-") as scratch:
            report["screen"].append(on_screen(workload, Path(scratch)))
        print(json.dumps({k: v for k, v in report["screen"][-1].items() if k != "last_lines"}), file=sys.stderr,
              flush=True)
        save()
    if not args.screen_only:
        report["worker"] = worker_report()
    save()
    sys.stdout.write(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
