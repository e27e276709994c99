"""How soon the API gives a number for a workload it has never seen, on this machine with a CPU worker.

Brings up, on a database and Redis database of its own: the API (`understudy serve`) and one `understudy worker`
(without a GPU it serves the analytic estimator from its warm measuring process, worker.measuring). Once the worker
has answered one throwaway request, it POSTs each of 20 models (every one new to the service) and polls the
prediction every 50 ms, timing from the POST's start to the first response that carries a number (the POST's body
or a poll). Then it POSTs the same 20 again (answered from the cache). Writes results/first-answer.json and .md.

    .venv/bin/python -m benchmarks.service.first_answer     # PostgreSQL at 127.0.0.1:5432 (root, trust), Redis

It drops and re-creates the database `understudy_first_answer` and flushes Redis database 8 (REDIS_URL overrides).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
DATABASE = "understudy_first_answer"
MODELS = ("resnet18", "resnet50", "vit_base_patch16_224", "convnext_tiny", "efficientnet_b0",
          "mobilenetv3_large_100", "regnety_032", "deit_small_patch16_224", "swin_tiny_patch4_window7_224",
          "densenet121", "vit_large_patch16_224", "coatnet_0_rw_224", "maxvit_tiny_tf_224", "efficientnet_b3",
          "resnext50_32x4d", "convnext_base", "beit_base_patch16_224", "levit_256", "mixer_b16_224",
          "eva02_base_patch14_224")
TARGETS = ["rtx-3090", "t4", "rtx-4090"]
WORKLOAD = {"mode": "train", "batch_size": 32, "precision": "amp-fp16"}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def first_number(client: httpx.Client, model: str) -> dict[str, Any]:
    """POST one workload and poll it until a response carries a number: seconds from the POST's start."""
    started = time.perf_counter()
    posted = client.post("/v1/predictions", json={"workload": {"model": model, **WORKLOAD}, "targets": TARGETS})
    posted.raise_for_status()
    body = posted.json()
    first = body["data"][0]
    polls = 0
    while number(first) is None and first["status"] not in ("failed", "oom"):
        if time.perf_counter() - started > 120:
            raise RuntimeError(f"{model}: no number within 120 s (last answer: {first})")
        time.sleep(0.05)
        polled = client.get(f"/v1/predictions/{first['id']}")
        polled.raise_for_status()
        first = polled.json()
        polls += 1
    return {"model": model, "seconds": round(time.perf_counter() - started, 3), "http": posted.status_code,
            "polls": polls, "status": first["status"], "answer": first.get("answer"), "latency_ms": number(first),
            "estimator": first.get("estimator")}


def number(prediction: dict[str, Any]) -> float | None:
    """The step time a prediction shows now: its final answer's, else its GPU-free estimate's."""
    if prediction.get("latency"):
        return float(prediction["latency"]["median_ms"])
    estimate = prediction.get("estimate") or {}
    return estimate.get("latency_ms")


def serve(env: dict[str, str], port: int, logs: Path) -> list[subprocess.Popen[bytes]]:
    """Start the API and one worker, each logging to a file of its own in `logs`."""
    commands = {"api": ["serve", "--port", str(port), "--log-level", "warning"], "worker": ["worker", "--gpu", "0"]}
    processes = []
    for name, arguments in commands.items():
        with (logs / f"{name}.log").open("wb") as log:  # the child keeps its own copy of the descriptor
            processes.append(subprocess.Popen([str(VENV_BIN / "understudy"), *arguments], env=env, cwd=ROOT,
                                              stdout=log, stderr=subprocess.STDOUT))
    return processes


def run(port: int, redis_url: str, logs: Path) -> dict[str, Any]:
    url = f"postgresql://root@127.0.0.1:5432/{DATABASE}"
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "root", "-d", "postgres", "-qc",
                    f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"], check=True)
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "root", "-d", "postgres", "-qc", f"CREATE DATABASE {DATABASE}"],
                   check=True)
    subprocess.run(["redis-cli", "-u", redis_url, "flushdb"], check=True, capture_output=True)
    # One key polls 20 times a second: rate limits it cannot reach (as benchmarks/load does).
    limits = {name: "1000000000" for name in ("UNDERSTUDY_RATE_LIMIT_PER_KEY", "UNDERSTUDY_RATE_LIMIT_PER_IP",
                                              "UNDERSTUDY_READ_LIMIT_PER_KEY", "UNDERSTUDY_READ_LIMIT_PER_IP")}
    env = {**os.environ, **limits, "DATABASE_URL": url, "REDIS_URL": redis_url, "UNDERSTUDY_HOST_NAME": "first-answer",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    subprocess.run([str(VENV_BIN / "alembic"), "upgrade", "head"], env=env, cwd=ROOT, check=True,
                   capture_output=True)
    key = subprocess.run([str(VENV_BIN / "understudy"), "keys", "create", "--name", "first-answer"], env=env,
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    processes = serve(env, port, logs)
    started = time.perf_counter()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"X-API-Key": key}, timeout=30) as client:
            while True:
                try:
                    if client.get("/v1/hosts").json()["data"]:
                        break
                except (httpx.HTTPError, KeyError, ValueError):
                    pass
                if time.perf_counter() - started > 120:
                    raise RuntimeError("the worker did not register within 120 s; see " + str(logs))
                time.sleep(0.2)
            registered = time.perf_counter() - started
            warm = first_number(client, "resnet34")  # the worker's first job: its measuring process is warm after
            rows = [first_number(client, model) for model in MODELS]
            cached = [first_number(client, model) for model in MODELS]
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
    seconds = [row["seconds"] for row in rows]
    cached_seconds = [row["seconds"] for row in cached]
    return {"worker_registered_s": round(registered, 3), "throwaway_first": warm, "new": rows, "cached": cached,
            "new_p50_s": round(statistics.median(seconds), 3), "new_p95_s": round(percentile(seconds, 0.95), 3),
            "new_max_s": round(max(seconds), 3), "cached_p50_s": round(statistics.median(cached_seconds), 3),
            "cached_p95_s": round(percentile(cached_seconds, 0.95), 3), "load_after": os.getloadavg()}


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# The first number for a new workload, over HTTP ({report['date']}, {report['machine']})", "",
             f"`{report['command']}`; load average before {report['load_before']}, after {report['load_after']}.", "",
             f"New workloads: p50 {report['new_p50_s']} s, **p95 {report['new_p95_s']} s**, max {report['new_max_s']} s"
             f" (goal: p95 at most 2 s). Cached: p50 {report['cached_p50_s']} s, p95 {report['cached_p95_s']} s.",
             f"The worker registered {report['worker_registered_s']} s after it started; its first (throwaway) job "
             f"took {report['throwaway_first']['seconds']} s.", "",
             "| model | new: seconds to a number | polls | status | answer | ms | cached: seconds | HTTP |",
             "|---|---|---|---|---|---|---|---|"]
    for row, again in zip(report["new"], report["cached"], strict=True):
        lines.append(f"| {row['model']} | {row['seconds']} | {row['polls']} | {row['status']} | {row['answer']} "
                     f"| {row['latency_ms'] and round(row['latency_ms'], 2)} | {again['seconds']} | {again['http']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "service" / "results")
    parser.add_argument("--port", type=int, default=8093)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="understudy-first-answer-"))
    report: dict[str, Any] = {"command": "python -m benchmarks.service.first_answer " + " ".join(sys.argv[1:]),
                              "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                              "machine": f"{os.cpu_count()} cores, {os.uname().nodename}",
                              "load_before": os.getloadavg()}
    report.update(run(args.port, os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/8"), logs))
    (args.out / "first-answer.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "first-answer.md").write_text(markdown(report))
    sys.stdout.write(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
