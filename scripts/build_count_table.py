"""Make engine/data/count-table.zip: every model's default workload (training and inference; amp-fp16, NCHW, SGD) at
224 px and at the model's own input size (timm's pretrained configuration; that one alone for a model that takes no
other), the same in channels-last, and both formats in fp32, counted on the meta device at two batch sizes and
checked at a third (engine.count_table); then, in amp-bf16, the families whose amp-bf16 step counts otherwise than
their amp-fp16 one (thin grouped convolutions, a softmax into fp32: engine.count_table.bf16_counts_apart; the others
are read from their amp-fp16 entry).

    .venv/bin/python scripts/build_count_table.py --processes 2
    .venv/bin/python scripts/build_count_table.py --processes 2 --from-table engine/data/count-table.zip

Each family's result is appended to a JSON-lines progress file (`--progress`) as it comes, so a stopped run resumes
where it was; the table is written from that file at the end. `--from-table` takes the families an existing table
(of the installed timm) holds as done. A model that fails to build or count, or whose counts are not affine in the
batch size, is reported and left out (it is counted when predicted, as any workload).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib import metadata
from multiprocessing import Pool
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from understudy.workload import (MemoryFormat, Mode, Precision, Workload, timm_model_names,  # noqa: E402
                                 torchvision_model_names)
from engine.count_table import (TABLE_FILE, AffineCounts, CountTable, bf16_counts_apart, bf16_twin,  # noqa: E402
                                count_affine, installed_timm, write_table)

MODES: tuple[Mode, ...] = ("train", "infer")
FORMATS: tuple[MemoryFormat, ...] = ("nchw", "nhwc")


Family = tuple[str, Mode, tuple[int, int], Precision, MemoryFormat]  # model, mode, resolution, precision, format
FIELDS = ("model", "mode", "resolution", "precision", "memory_format")


def resolutions(model: str) -> list[tuple[int, int]]:
    """224 px, the workload's default, and the model's own input size; only the latter for a model fixed to it."""
    import timm

    config = timm.get_pretrained_cfg(model) if model in timm_model_names() else None
    if config is None:
        return [(224, 224)]
    native = (int(config.input_size[1]), int(config.input_size[2]))
    return [native] if config.fixed_input_size or native == (224, 224) else [(224, 224), native]


def _workload(family: Family) -> Workload:
    return Workload.model_validate(dict(zip(FIELDS, family, strict=True)))


def _count(family: Family) -> dict[str, Any]:
    row: dict[str, Any] = dict(zip(FIELDS, family, strict=True)) | {"resolution": list(family[2])}
    started = time.perf_counter()
    workload = _workload(family)
    try:
        counts = count_affine(workload)
        apart = {"bf16_apart": bf16_counts_apart(workload, counts)} if family[3] == "amp-fp16" else {}
    except Exception as exc:  # noqa: BLE001 - one model's failure is that model's line
        return row | {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return row | {"counts": counts.to_json(), "seconds": round(time.perf_counter() - started, 2)} | apart


def _bf16_apart(row: dict[str, Any]) -> bool:
    """Whether an amp-fp16 family's amp-bf16 step is counted on its own; a row of another table says it by having one
    (_table_rows)."""
    return bool(row.get("bf16_apart", not bf16_twin(AffineCounts.from_json(row["counts"]))))


def _family(row: dict[str, Any]) -> Family:
    height, width = row["resolution"]
    return (str(row["model"]), row["mode"], (int(height), int(width)), row.get("precision", "amp-fp16"),
            row.get("memory_format", "nchw"))


def _table_rows(path: Path) -> list[dict[str, Any]]:
    """The families an existing table holds, as progress rows."""
    table = CountTable(path)
    if table.about.get("timm") != installed_timm():
        raise SystemExit(f"{path} was made with timm {table.about.get('timm')}, not the installed {installed_timm()}")
    rows = [{key: family[key] for key in FIELDS} | {"counts": counts.to_json()} for family, counts in table.entries()]

    def twin(row: dict[str, Any]) -> Family:
        return (*_family(row)[:3], "amp-bf16", row["memory_format"])

    apart = {twin(row) for row in rows if row["precision"] == "amp-bf16"}
    return [row | {"bf16_apart": twin(row) in apart} if row["precision"] == "amp-fp16" else row for row in rows]


def _count_all(todo: list[Family], done: dict[Family, dict[str, Any]], progress_path: Path,
               processes: int) -> None:
    """Count these families into `done`, each appended to the progress file as it comes."""
    print(f"{len(done)} families done, {len(todo)} to count", file=sys.stderr, flush=True)
    with progress_path.open("a") as progress, Pool(processes, maxtasksperchild=50) as pool:
        for number, row in enumerate(pool.imap_unordered(_count, todo, chunksize=2), start=1):
            progress.write(json.dumps(row) + "\n")
            progress.flush()
            done[_family(row)] = row
            if "error" in row:
                print(f"{_family(row)}: {row['error']}", file=sys.stderr, flush=True)
            if number % 50 == 0:
                print(f"{number}/{len(todo)}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "engine" / "data" / TABLE_FILE)
    # Named for the timm that counts, so that a run under another never resumes from this one's counts.
    parser.add_argument("--progress", type=Path, default=Path(f"/tmp/count-table-timm-{installed_timm()}.jsonl"))
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--models", nargs="*", help="these models only (default: every model Understudy knows)")
    parser.add_argument("--from-table", type=Path, help="an existing table whose families count as done")
    args = parser.parse_args()

    models = args.models or sorted(timm_model_names() | torchvision_model_names())
    done: dict[Family, dict[str, Any]] = {}
    seeded = _table_rows(args.from_table) if args.from_table else []
    progressed = [json.loads(line) for line in args.progress.read_text().splitlines()] if args.progress.exists() else []
    for row in seeded + progressed:
        done[_family(row)] = row
    fp16: list[Family] = [(model, mode, resolution, "amp-fp16", memory_format) for memory_format in FORMATS
                          for model in models for resolution in resolutions(model) for mode in MODES]
    wanted = fp16 + [(*family[:3], "fp32", family[4]) for family in fp16]
    _count_all([family for family in wanted if family not in done], done, args.progress, args.processes)
    # Only the families whose amp-bf16 step launches other kernels than their amp-fp16 one need a count.
    wanted += [(*family[:3], "amp-bf16", family[4]) for family in fp16
               if "counts" in done[family] and _bf16_apart(done[family])]
    _count_all([family for family in wanted if family not in done], done, args.progress, args.processes)

    entries = [(_workload(family), AffineCounts.from_json(done[family]["counts"]))
               for family in wanted if "counts" in done[family]]
    write_table(args.out, entries, {"timm": installed_timm(), "torch": metadata.version("torch"),
                                    "families": len(entries)})
    failed = sum(1 for family in wanted if "error" in done[family])
    print(f"wrote {args.out}: {len(entries)} families, {failed} left out", file=sys.stderr)


if __name__ == "__main__":
    main()
