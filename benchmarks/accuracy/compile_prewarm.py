"""Compile the workloads of a ground-truth file in several processes at once, to fill inductor's on-disk caches before
they are timed one at a time (on the GPU host; h200_compile.sh).

torch.compile spends 20-60 s of CPU on a model the first time and a few seconds once inductor's caches
(TORCHINDUCTOR_CACHE_DIR) hold its graph, so compiling on many cores first and timing afterwards measures several
times more workloads in one device call than compiling each as it is timed. Each workload's step is built as the
engine builds it (engine.workloads.make_step, graph-safe, on the GPU) and called once; nothing is timed but the
compile. The rows that compiled are written to `--warm`, a ground-truth file for `understudy evaluate`.

    TORCHINDUCTOR_COMPILE_THREADS=1 python benchmarks/accuracy/compile_prewarm.py \\
        benchmarks/accuracy/compile/workloads.csv --processes 12 --budget-s 220 --out prewarm.jsonl --warm warm.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evaluation.evaluate import read_rows


def compile_one(row: dict[str, str]) -> dict[str, Any]:
    """Build one row's compiled step on GPU 0 and call it once: the call compiles it."""
    import torch

    from understudy.workload import workload_from_row
    from engine.workloads import make_step

    torch.backends.cudnn.benchmark = True
    result: dict[str, Any] = {"model": row["model"], "batch_size": row["batch_size"],
                              "resolution": row["resolution"]}
    started = time.perf_counter()
    try:
        step = make_step(workload_from_row(row), torch.device("cuda", 0), graph_safe=True)
        built = time.perf_counter()
        step.run()
        torch.cuda.synchronize()
        result.update(status="done", build_s=round(built - started, 2),
                      compile_s=round(time.perf_counter() - built, 2))
        del step
    except Exception as exc:  # noqa: BLE001 - a model that fails to compile is a result, not the end of the run
        result.update(status="failed", error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                      if str(exc) else type(exc).__name__)
    torch.cuda.empty_cache()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="ground-truth CSV of compiled workloads")
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--budget-s", type=float, default=220.0, help="stop waiting for compiles after this long")
    parser.add_argument("--out", type=Path, required=True, help="one JSON line per workload")
    parser.add_argument("--warm", type=Path, required=True, help="the rows that compiled, as a ground-truth CSV")
    args = parser.parse_args()

    rows = read_rows([args.file])
    columns = [name for name in rows[0] if name != "file"]
    deadline = time.monotonic() + args.budget_s
    # Spawned, not forked: each worker initialises CUDA itself.
    pool = multiprocessing.get_context("spawn").Pool(args.processes)
    results = pool.imap_unordered(compile_one, rows)
    done = 0
    with args.out.open("w") as out, args.warm.open("w", newline="") as warm:
        writer = csv.DictWriter(warm, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        by_key = {(row["model"], row["batch_size"], row["resolution"]): row for row in rows}
        for _ in rows:
            try:
                result = results.next(timeout=max(1.0, deadline - time.monotonic()))
            except multiprocessing.TimeoutError:
                print(f"budget spent: {done} of {len(rows)} compiled", flush=True)
                break
            done += 1
            out.write(json.dumps(result) + "\n")
            out.flush()
            print(json.dumps(result), flush=True)
            if result["status"] == "done":
                writer.writerow(by_key[(result["model"], result["batch_size"], result["resolution"])])
                warm.flush()
    pool.terminate()
    pool.join()


if __name__ == "__main__":
    main()
