"""Count every workload of some ground-truth files on the meta device, in parallel, into a pickle the fitting and
scoring scripts share (`--counts-cache`). Counting the ~2,500 distinct workloads of ../shared/groundtruth takes tens
of minutes on two cores; the cache keeps them between fits. A workload whose model fails to build is stored as None.

    python benchmarks/accuracy/count_cache.py ../shared/groundtruth/*.csv --out /tmp/counts.pkl --processes 2

`--recount MODELS` counts again what the cache holds of some models (after a change to the trace that touches only
their steps), and every PyTorch 1.x workload.

`--pack` writes the cache small enough to bring back from the GPU host (where 16 cores count it in minutes): each
workload's identical ops stored once with their number, lzma-compressed. read_cache reads either form.
"""

from __future__ import annotations

import argparse
import lzma
import pickle
import sys
import time
from collections import Counter
from dataclasses import replace
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from understudy.workload import Workload, workload_from_row
from engine.counts import WorkloadCounts
from evaluation.evaluate import read_rows


def read_cache(path: Path) -> dict[str, WorkloadCounts | None]:
    data = path.read_bytes()
    if not data.startswith(b"\xfd7zXZ"):
        counts: dict[str, WorkloadCounts | None] = pickle.loads(data)
        return counts
    packed: dict[str, tuple[WorkloadCounts, list[tuple[tuple[str, float, float], int]]] | None]
    packed = pickle.loads(lzma.decompress(data))
    return {digest: None if entry is None else _unpacked(*entry) for digest, entry in packed.items()}


def write_packed(counts: dict[str, WorkloadCounts | None], path: Path) -> None:
    packed = {digest: None if c is None else (replace(c, ops=[]), list(Counter(c.ops).items()))
              for digest, c in counts.items()}
    path.write_bytes(lzma.compress(pickle.dumps(packed)))


def _unpacked(counts: WorkloadCounts, ops: list[tuple[tuple[str, float, float], int]]) -> WorkloadCounts:
    return replace(counts, ops=[op for op, number in ops for _ in range(number)])


def load_counts(workloads: list[Workload], cache: Path | None,
                cached_only: bool = False) -> dict[str, WorkloadCounts | None]:
    """The counts of `workloads` by digest: from the cache where it has them, counted (and added to it) otherwise,
    unless `cached_only`."""
    known = read_cache(cache) if cache and cache.exists() else {}
    missing = [] if cached_only else [w for w in workloads if w.digest() not in known]
    for workload in missing:
        known[workload.digest()] = _count(workload)[1]
    if cache and missing:
        cache.write_bytes(pickle.dumps(known))
    return known


def _count(workload: Workload) -> tuple[str, WorkloadCounts | None, str | None]:
    """The workload's digest, its counts, and why there are none (None when counted)."""
    from engine.counting import count_workload

    try:
        return workload.digest(), count_workload(workload), None
    except Exception as exc:  # noqa: BLE001 - a model this timm cannot build is left out of every fit
        return workload.digest(), None, f"{workload.label}: {exc!r}"[:300]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--pack", type=Path, help="also write the packed form here")
    parser.add_argument("--recount", type=Path,
                        help="a file of model names, one a line: their workloads are counted again, as is every "
                        "PyTorch 1.x workload (attention traced as its matmuls and softmax), though the cache has them")
    args = parser.parse_args()
    known = read_cache(args.out) if args.out.exists() else {}
    recount = set(args.recount.read_text().split()) if args.recount else None
    todo: dict[str, Workload] = {}
    for row in read_rows(args.files):
        try:
            workload = workload_from_row(row)
        except Exception:  # noqa: BLE001 - a model name this timm lacks
            continue
        again = recount is not None and (workload.model in recount or workload.torch_major < 2)
        if workload.digest() not in known or again:
            todo[workload.digest()] = workload
    print(f"{len(known)} counted before, {len(todo)} to count", flush=True)
    started = time.monotonic()
    failed: list[str] = []
    with Pool(args.processes, maxtasksperchild=50) as pool:
        for index, (digest, counts, error) in enumerate(pool.imap_unordered(_count, todo.values(), chunksize=4), 1):
            known[digest] = counts
            if error:
                failed.append(error)
            if index % 100 == 0 or index == len(todo):
                args.out.write_bytes(pickle.dumps(known))
                print(f"{index}/{len(todo)} in {time.monotonic() - started:.0f} s", flush=True)
    args.out.write_bytes(pickle.dumps(known))
    # Said, not only stored as None: one sehalonet33ts workload once failed on the GPU host and counted here.
    print(f"{len(failed)} not counted" + "".join(f"\n  {error}" for error in failed), flush=True)
    if args.pack:
        write_packed(known, args.pack)


if __name__ == "__main__":
    main()
