"""Make engine/data/count-table.zip: every model's default workload (training and inference; amp-fp16, NCHW, SGD) at
224 px and at the model's own input size (timm's pretrained configuration; that one alone for a model that takes no
other), counted on the meta device at two batch sizes and checked at a third (engine.count_table).

    .venv/bin/python scripts/build_count_table.py --processes 2

Each family's result is appended to a JSON-lines progress file (`--progress`) as it comes, so a stopped run resumes
where it was; the table is written from that file at the end. A model that fails to build or count, or whose counts
are not affine in the batch size, is reported and left out (it is counted when predicted, as any workload).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib import metadata
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from understudy.workload import Mode, Workload, timm_model_names, torchvision_model_names  # noqa: E402
from engine.count_table import TABLE_FILE, AffineCounts, count_affine, installed_timm, write_table  # noqa: E402

MODES: tuple[Mode, ...] = ("train", "infer")


Family = tuple[str, Mode, tuple[int, int]]  # model, mode, resolution


def resolutions(model: str) -> list[tuple[int, int]]:
    """224 px, the workload's default, and the model's own input size; only the latter for a model fixed to it."""
    import timm

    config = timm.get_pretrained_cfg(model) if model in timm_model_names() else None
    if config is None:
        return [(224, 224)]
    native = (int(config.input_size[1]), int(config.input_size[2]))
    return [native] if config.fixed_input_size or native == (224, 224) else [(224, 224), native]


def _count(family: Family) -> dict[str, object]:
    model, mode, resolution = family
    row: dict[str, object] = {"model": model, "mode": mode, "resolution": list(resolution)}
    started = time.perf_counter()
    try:
        counts = count_affine(Workload(model=model, mode=mode, resolution=resolution))
    except Exception as exc:  # noqa: BLE001 - one model's failure is that model's line
        return row | {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return row | {"counts": counts.to_json(), "seconds": round(time.perf_counter() - started, 2)}


def _family(row: dict[str, object]) -> Family:
    height, width = row["resolution"]  # type: ignore[misc]
    return str(row["model"]), row["mode"], (int(height), int(width))  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "engine" / "data" / TABLE_FILE)
    # Named for the timm that counts, so that a run under another never resumes from this one's counts.
    parser.add_argument("--progress", type=Path, default=Path(f"/tmp/count-table-timm-{installed_timm()}.jsonl"))
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--models", nargs="*", help="these models only (default: every model Understudy knows)")
    args = parser.parse_args()

    models = args.models or sorted(timm_model_names() | torchvision_model_names())
    done: dict[Family, dict[str, object]] = {}
    if args.progress.exists():
        for line in args.progress.read_text().splitlines():
            row = json.loads(line)
            done[_family(row)] = row
    wanted = [(model, mode, resolution) for model in models for resolution in resolutions(model) for mode in MODES]
    todo = [family for family in wanted if family not in done]
    print(f"{len(done)} families done, {len(todo)} to count", file=sys.stderr, flush=True)
    with args.progress.open("a") as progress, Pool(args.processes, maxtasksperchild=50) as pool:
        for number, row in enumerate(pool.imap_unordered(_count, todo, chunksize=2), start=1):
            progress.write(json.dumps(row) + "\n")
            progress.flush()
            done[_family(row)] = row
            if "error" in row:
                print(f"{_family(row)}: {row['error']}", file=sys.stderr, flush=True)
            if number % 50 == 0:
                print(f"{number}/{len(todo)}", file=sys.stderr, flush=True)

    entries = [(Workload(model=model, mode=mode, resolution=resolution),
                AffineCounts.from_json(done[(model, mode, resolution)]["counts"]))  # type: ignore[arg-type]
               for model, mode, resolution in wanted if "counts" in done[(model, mode, resolution)]]
    write_table(args.out, entries, {"timm": installed_timm(), "torch": metadata.version("torch"),
                                    "families": len(entries)})
    failed = sum(1 for family in wanted if "error" in done[family])
    print(f"wrote {args.out}: {len(entries)} families, {failed} left out", file=sys.stderr)


if __name__ == "__main__":
    main()
