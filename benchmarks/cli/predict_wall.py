"""Wall time of `understudy predict` as a user runs it: a fresh process each time, process start included.

Two measurements, each written as JSON and markdown to --out:

- `cache` (any machine; the committed report is from the project's 2-core machine without a GPU): the first
  (cold) prediction of a workload, with an empty cache and no remembered host probe, and its repeats, answered from
  the cache. The goal: a cached answer in under 1 s.
- `first` (the GPU test host): after a warm-up (imports with bytecode written, CUDA libraries read), the first
  prediction of one workload for 10 targets with the default estimator (`hostaware`), then the same workload for 1
  target, each in a fresh process with an empty cache; the goal is under 10 s for 10 targets and under 0.5 s per
  target beyond the first. A child process also times the phases of one prediction along the command's path
  (imports, host probe, store, counting, the measurement's parts, estimating).

    .venv/bin/python -m benchmarks.cli.predict_wall cache --out benchmarks/cli/results
    source scripts/device_setup.sh && python3 -m benchmarks.cli.predict_wall first --out $OUT

The machine is shared: the load average before and after each run is in the report.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The command line, run as a module so that it needs no installed `understudy` script (the GPU host has none).
CLI_MODULE = "cli"
ROOT = Path(__file__).resolve().parents[2]

CACHE_WORKLOAD = ["resnet50", "--mode", "train", "--batch-size", "32"]
CACHE_TARGETS = "t4,rtx-3090,rtx-4090"
# Ten catalog GPUs, consumer and data-center, small to large.
FIRST_TARGETS = ("rtx-2060", "t4", "rtx-3060-12-gb", "l4", "a10-pcie", "rtx-3080-10-gb", "rtx-3090",
                 "rtx-4070-super", "rtx-4090", "a100-sxm4-40-gb")
FIRST_WORKLOADS = (
    ["resnet50", "--mode", "train", "--batch-size", "64"],
    ["convnext_tiny", "--mode", "train", "--batch-size", "64"],
    ["vit_base_patch16_224", "--mode", "infer", "--batch-size", "64"],
    ["efficientnet_b0", "--mode", "infer", "--batch-size", "64"],
)


def predict_once(workload: list[str], targets: str, scratch: Path, *extra: str) -> dict[str, Any]:
    """One `understudy predict ... --json` in a fresh process with the cache under `scratch`: wall seconds, exit
    code, and how many of its answers came from the cache."""
    env = {**os.environ, "UNDERSTUDY_CACHE_DIR": str(scratch / "cache"),
           "DATABASE_URL": f"sqlite:///{scratch / 'predictions.sqlite'}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", CLI_MODULE, "predict", *workload, "--targets", targets, "--json", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds too: on a shared machine the wall time also counts the time others' processes held the cores.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run: dict[str, Any] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "exit_code": done.returncode}
    try:
        answer = json.loads(done.stdout)
        run["cached"] = sum(1 for p in answer["predictions"] if p["cached"])
        run["statuses"] = sorted({p["status"] for p in answer["predictions"]})
        run["estimator"] = answer["predictions"][0]["estimator"]
        run["host"] = answer["host"].get("gpu_name") or "no GPU"
    except (ValueError, KeyError, IndexError):
        run["stderr"] = done.stderr[-2000:]
    return run


def summary(walls: list[float]) -> dict[str, float]:
    return {"min_s": round(min(walls), 3), "median_s": round(statistics.median(walls), 3),
            "max_s": round(max(walls), 3), "runs": len(walls)}


def python_start() -> list[float]:
    """The floor: an interpreter that starts and exits."""
    walls = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        walls.append(time.perf_counter() - started)
    return walls


def cache(repeats: int, cold_runs: int) -> dict[str, Any]:
    report: dict[str, Any] = {"workload": " ".join(CACHE_WORKLOAD), "targets": CACHE_TARGETS,
                              "load_before": os.getloadavg()}
    report["python_start"] = summary(python_start())
    cold, cached = [], []
    for _ in range(cold_runs):
        with tempfile.TemporaryDirectory(prefix="understudy-cli-") as scratch:
            first = predict_once(CACHE_WORKLOAD, CACHE_TARGETS, Path(scratch))
            cold.append(first)
            if not cached:
                cached = [predict_once(CACHE_WORKLOAD, CACHE_TARGETS, Path(scratch)) for _ in range(repeats)]
    report["cold"] = {**summary([r["wall_s"] for r in cold]), "cpu": summary([r["cpu_s"] for r in cold]),
                      "runs_detail": cold}
    report["cached"] = {**summary([r["wall_s"] for r in cached]), "cpu": summary([r["cpu_s"] for r in cached]),
                        "runs_detail": cached}
    report["load_after"] = os.getloadavg()
    report["all_cached"] = all(r["cached"] == len(CACHE_TARGETS.split(",")) for r in cached)
    return report


# What `understudy predict` imports on a cache miss, imported once before anything is timed (engine.estimators
# and cli.local bring in the rest lazily; tests/engine/test_cli.py keeps a cached answer free of torch).
WARM_UP_IMPORTS = ("torch", "timm", "torch.profiler", "torch.utils.flop_counter", "cli.main", "cli.local",
                   "cli.service", "engine.engine", "engine.bench", "engine.timing", "engine.counting",
                   "engine.workloads", "engine.estimators.hostaware", "engine.estimators.memory", "ledger.db",
                   "ledger.predictions")
# The CUDA libraries torch loads only at a first convolution or matrix product (cuDNN, cuBLAS, and NVRTC for
# cuDNN's runtime-compiled kernels): read once, so that the first timed workload does not pay for the disk.
LAZY_LIBRARIES = ("libcudnn*.so*", "libcublas*.so*", "libnvrtc*.so*")
WARM_UP = f"""
import glob, importlib, os, sys
for name in {WARM_UP_IMPORTS!r}:
    importlib.import_module(name)
import nvidia, torch
for folder in [*nvidia.__path__, os.path.dirname(torch.__file__)]:
    for pattern in {LAZY_LIBRARIES!r}:
        for path in glob.glob(os.path.join(folder, "**", pattern), recursive=True):
            with open(path, "rb") as library:
                while library.read(1 << 24):
                    pass
from ledger.db import init_sqlite
init_sqlite("sqlite:///:memory:")
torch.cuda.is_available() and torch.cuda.init()
"""


def warm_up() -> dict[str, Any]:
    """Once, before anything is timed: the Python and CUDA libraries into the page cache, and Python's bytecode
    written, so that the first timed run does not pay for the disk or the compiler and make the later ones look
    cheaper than they are. Bytecode is what pip writes when it installs a package; an image that ships packages
    without it (the GPU test host's sets PYTHONDONTWRITEBYTECODE and has none for torch) would make every process
    compile torch, timm and torchvision anew. The timed runs keep the machine's setting and only read it."""
    plain_import = [sys.executable, "-c", "import torch, timm"]
    torch_init = importlib.util.find_spec("torch")
    had_bytecode = bool(torch_init and torch_init.origin
                        and Path(importlib.util.cache_from_source(torch_init.origin)).is_file())
    started = time.perf_counter()
    subprocess.run(plain_import, check=False, cwd=ROOT, timeout=600)
    before = time.perf_counter() - started
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", WARM_UP], check=False, cwd=ROOT, env=env, timeout=600)
    warm = time.perf_counter() - started
    started = time.perf_counter()
    subprocess.run(plain_import, check=False, cwd=ROOT, timeout=600)
    return {"import_torch_timm_before_s": round(before, 3), "warm_up_s": round(warm, 3),
            "import_torch_timm_after_s": round(time.perf_counter() - started, 3),
            "torch_had_bytecode": had_bytecode,
            "machine_forbids_bytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))}


def first(workloads: list[list[str]], save: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Per workload, in this order: ten targets (the first prediction of the workload on this machine: it also pays
    for the kernels the CUDA driver compiles and caches on disk for it), the ten again (from the cache), one target
    in a fresh cache, and the phases in a child. `save` gets the report after each workload."""
    report: dict[str, Any] = {"targets": list(FIRST_TARGETS), "load_before": os.getloadavg(), "workloads": []}
    report["python_start"] = summary(python_start())
    report.update(warm_up())
    for workload in workloads:
        row: dict[str, Any] = {"workload": " ".join(workload)}
        with tempfile.TemporaryDirectory(prefix="understudy-cli-") as scratch:
            row["ten_targets"] = predict_once(workload, ",".join(FIRST_TARGETS), Path(scratch))
            row["ten_targets_cached"] = predict_once(workload, ",".join(FIRST_TARGETS), Path(scratch))
        with tempfile.TemporaryDirectory(prefix="understudy-cli-") as scratch:
            row["one_target"] = predict_once(workload, FIRST_TARGETS[0], Path(scratch))
        # An upper bound: the one-target run comes second and finds the driver's compiled kernels on disk.
        row["per_extra_target_s"] = round((row["ten_targets"]["wall_s"] - row["one_target"]["wall_s"])
                                          / (len(FIRST_TARGETS) - 1), 3)
        row["phases"] = phases_in_child(workload)
        report["workloads"].append(row)
        report["load_after"] = os.getloadavg()
        save(report)
        print(f"{row['workload']}: 10 targets {row['ten_targets']['wall_s']:.1f} s, 1 target "
              f"{row['one_target']['wall_s']:.1f} s, cached {row['ten_targets_cached']['wall_s']:.2f} s",
              file=sys.stderr, flush=True)
    return report


def phases_in_child(workload: list[str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "benchmarks.cli.predict_wall", "phases", "--", *workload],
                          capture_output=True, text=True, cwd=ROOT, timeout=900, check=False)
    try:
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"error": done.stderr[-2000:]}


def phases(workload_args: list[str]) -> dict[str, float]:
    """One first prediction's phases, in this process, along the path `understudy predict` takes (cli.local's
    LocalPredictor, an empty cache): what the 10-target wall time is made of. The measurement is split by wrapping
    engine.timing's steps, which changes nothing they do."""
    marks: dict[str, float] = {}
    started = time.perf_counter()

    def mark(name: str) -> None:
        nonlocal started
        marks[name] = round(time.perf_counter() - started, 3)
        started = time.perf_counter()

    import torch  # noqa: F401 - the import is the phase

    mark("import_torch_s")
    import timm  # noqa: F401

    mark("import_timm_s")
    from cli import main as _cli_main  # noqa: F401 - what the command imports before it predicts
    from cli.local import LocalPredictor, predict_cached
    from engine import timing
    from engine.count_lookup import counts_for
    from engine.engine import Engine
    from understudy.catalog import resolve_target
    from understudy.settings import get_settings
    from understudy.workload import Workload

    model, *options = workload_args
    pairs = dict(zip(options[::2], options[1::2], strict=True))
    workload = Workload(model=model, mode=pairs.get("--mode", "train"),  # type: ignore[arg-type]
                        batch_size=int(pairs.get("--batch-size", 32)))
    targets = [resolve_target(name) for name in FIRST_TARGETS]
    mark("import_cli_s")
    parts: dict[str, float] = {}

    def timed(name: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            begun = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                parts[name] = parts.get(name, 0.0) + time.perf_counter() - begun
        return wrapper

    timing.StepTimer._build = timed("build_step_s", timing.StepTimer._build)  # type: ignore[method-assign]
    for name in ("_warm_up", "_capture", "_time_windows", "_profile"):
        setattr(timing, name, timed(name.strip("_") + "_s", getattr(timing, name)))
    Engine._result = timed("estimate_s", Engine._result)  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix="understudy-phases-") as scratch:
        settings = get_settings().model_copy(update={"cache_dir": scratch})
        local = LocalPredictor(settings, f"sqlite:///{Path(scratch) / 'predictions.sqlite'}")
        engine = local.engine()
        mark("engine_and_host_probe_s")
        store = local.store()
        mark("open_store_s")
        counts_for(workload)
        mark("count_on_meta_device_s")
        predict_cached(engine, store, workload, targets)
        mark("measure_estimate_store_10_targets_s")
        marks.update({f"of_which.{name}": round(value, 3) for name, value in parts.items()})
        parts.clear()
        # Again in this process: the CUDA context, the libraries and cuDNN's algorithm choices are warm now, so
        # the difference from the first is what a first measurement pays once.
        engine.predict(workload, targets)
        mark("measure_estimate_10_targets_again_s")
        marks.update({f"again.{name}": round(value, 3) for name, value in parts.items()})
    return marks


def markdown(kind: str, report: dict[str, Any]) -> str:
    lines = [f"# `understudy predict` wall time: {kind}", "", f"Command: `{report['command']}`  ",
             f"Date: {report['date']}; machine: {report['machine']}; load average before "
             f"{report['load_before'][0]:.2f}, after {report['load_after'][0]:.2f}  ",
             f"Python start alone: median {report['python_start']['median_s']:.3f} s", ""]
    if kind == "cache":
        lines += [f"Workload `{report['workload']}` on `{report['targets']}`, fresh processes. Wall: seconds from "
                  "start to exit; CPU: the process's user + system seconds.", "",
                  "| run | wall min s | wall median s | wall max s | CPU median s | runs |",
                  "|---|---|---|---|---|---|"]
        for name in ("cold", "cached"):
            s = report[name]
            lines.append(f"| {name} | {s['min_s']:.3f} | {s['median_s']:.3f} | {s['max_s']:.3f} | "
                         f"{s['cpu']['median_s']:.3f} | {s['runs']} |")
        lines += ["", f"Every cached run answered all targets from the cache: {report['all_cached']}."]
    else:
        lines += [f"Before anything is timed: `import torch, timm` took {report['import_torch_timm_before_s']:.2f} s "
                  f"(a cold page cache{'' if report['torch_had_bytecode'] else ', no bytecode for torch'}"
                  f"{', PYTHONDONTWRITEBYTECODE set' if report['machine_forbids_bytecode'] else ''}); the warm-up "
                  f"(imports with bytecode written, the CUDA libraries read) {report['warm_up_s']:.2f} s; "
                  f"`import torch, timm` after it {report['import_torch_timm_after_s']:.2f} s.", "",
                  "Per workload, in order: ten targets (the workload's first prediction), the ten again (cached), "
                  "one target in a fresh cache. Per extra target: (ten - one) / 9, an upper bound (the one-target "
                  "run finds the kernels the driver compiled for the first on disk).", "",
                  "| workload | 10 targets s | 10 cached s | 1 target s | per extra target s |",
                  "|---|---|---|---|---|"]
        for row in report["workloads"]:
            lines.append(f"| {row['workload']} | {row['ten_targets']['wall_s']:.2f} | "
                         f"{row['ten_targets_cached']['wall_s']:.2f} | {row['one_target']['wall_s']:.2f} | "
                         f"{row['per_extra_target_s']:.3f} |")
        names = list(dict.fromkeys(name for row in report["workloads"] for name in row["phases"]))
        lines += ["", "Phases of one first prediction in a child process, along the command's path (seconds; "
                  "`of_which` splits the measurement, `again` repeats it in the same process):", "",
                  "| phase | " + " | ".join(row["workload"].split()[0] for row in report["workloads"]) + " |",
                  "|---|" + "---|" * len(report["workloads"])]
        for name in names:
            lines.append(f"| {name} | " + " | ".join(str(row["phases"].get(name, "")) for row in report["workloads"])
                         + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["cache", "first", "phases"])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "cli" / "results")
    parser.add_argument("--repeats", type=int, default=10, help="cache: cached runs")
    parser.add_argument("--cold-runs", type=int, default=3, help="cache: cold runs, each with an empty cache")
    parser.add_argument("--workloads", type=int, default=len(FIRST_WORKLOADS), help="first: how many workloads")
    parser.add_argument("workload", nargs="*", help="phases: MODEL --mode M --batch-size B")
    args = parser.parse_args()
    if args.kind == "phases":
        sys.stdout.write(json.dumps(phases(args.workload)) + "\n")
        return 0
    # The project's settings from the environment change what is measured (UNDERSTUDY_CUDNN_BENCHMARK=0, say), so
    # the command as reported carries them.
    settings = [f"{name}={value}" for name, value in sorted(os.environ.items()) if name.startswith("UNDERSTUDY_")]
    command = " ".join([*settings, Path(sys.executable).name, "-m", "benchmarks.cli.predict_wall", *sys.argv[1:]])
    args.out.mkdir(parents=True, exist_ok=True)

    def save(report: dict[str, Any]) -> None:
        report.update(command=command, date=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                      machine=f"{os.cpu_count()} cores, {os.uname().nodename}")
        (args.out / f"{args.kind}.json").write_text(json.dumps(report, indent=2) + "\n")
        (args.out / f"{args.kind}.md").write_text(markdown(args.kind, report))

    if args.kind == "cache":
        report = cache(args.repeats, args.cold_runs)
    else:
        report = first(list(FIRST_WORKLOADS[: args.workloads]), save)
    save(report)
    sys.stdout.write(markdown(args.kind, report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
