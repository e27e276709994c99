"""The evaluation report: per-estimator accuracy as JSON and markdown, a predicted-vs-measured plot, and every row.

build_report turns scored rows into a JSON-able dict; write_report renders it (plus the rows themselves) to files.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.metrics import (
    WITHIN_THRESHOLDS,
    ape,
    error_summary,
    grouped,
    natural_key,
    paired,
    ranking_summary,
)
from evaluation.rows import EvalRow

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
SCATTER_PNG = "predicted_vs_measured.png"
ROWS_CSV = "rows.csv"
ROWS_JSONL = "rows.jsonl"

TOP_FAMILIES = 25
BAND_PERCENT = 20

# The meta keys a reader looks for first, in this order; any others follow alphabetically.
META_ORDER: tuple[str, ...] = ("command", "software", "host", "sample")
# Longer lists in the meta (a GPU's supported clocks) are cut to this many items in the markdown header.
META_LIST_ITEMS = 8

GROUPINGS: dict[str, Callable[[EvalRow], str]] = {
    "target": lambda row: row.target,
    "family": lambda row: row.family,
    "resolution": lambda row: str(row.resolution),
    "mode": lambda row: row.mode,
}

_ROW_COLUMNS: tuple[str, ...] = (
    "target",
    "model",
    "family",
    "resolution",
    "batch_size",
    "mode",
    "precision",
    "workload_key",
    "measured_ms",
)

_MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "*")


def _not_run(rows: Sequence[EvalRow], estimator: str) -> dict[str, Any]:
    missing = [row for row in rows if row.prediction(estimator) is None]
    return {
        "count": len(missing),
        "by_outcome": dict(sorted(Counter(row.outcome_of(estimator) for row in missing).items())),
        "rows": [
            {
                "model": row.model,
                "target": row.target,
                "workload_key": row.workload_key,
                "outcome": row.outcome_of(estimator),
                "note": row.note,
            }
            for row in missing
        ],
    }


def _estimator_report(rows: Sequence[EvalRow], estimator: str) -> dict[str, Any]:
    result: dict[str, Any] = {
        "overall": error_summary(*paired(rows, estimator)),
        "ranking": ranking_summary(rows, estimator),
    }
    for name, key in GROUPINGS.items():
        result[f"by_{name}"] = grouped(rows, estimator, key)
    result["not_run"] = _not_run(rows, estimator)
    return result


def build_report(rows: Sequence[EvalRow], estimators: Sequence[str], meta: dict[str, Any]) -> dict[str, Any]:
    """A JSON-able report: meta, row counts per group, and per estimator its overall error summary (over the rows
    where it gave a number), ranking summary, error summaries by target, family, resolution and mode, and the rows
    it could not run with their outcome counts."""
    group_rows: dict[str, dict[str, int]] = {}
    for name, key in GROUPINGS.items():
        counts = Counter(map(key, rows))
        group_rows[name] = {group: counts[group] for group in sorted(counts, key=natural_key)}
    return {
        "meta": meta,
        "n_rows": len(rows),
        "estimators": list(estimators),
        "group_rows": group_rows,
        "results": {estimator: _estimator_report(rows, estimator) for estimator in estimators},
    }


def _number(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _cell(text: object) -> str:
    # A pipe or line break inside a cell would split the markdown table.
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in line) + " |" for line in body]
    return lines


def _meta_value(key: str, value: Any) -> str:
    if isinstance(value, dict):
        # Unset fields of a nested record (a host probe's, say) only add noise to the header.
        return ", ".join(f"{k} {_meta_value(k, v)}" for k, v in value.items() if v not in (None, "", [], {}))
    if isinstance(value, list | tuple):
        shown = ", ".join(map(str, value[:META_LIST_ITEMS]))
        return shown if len(value) <= META_LIST_ITEMS else f"{shown}, … ({len(value)} in all)"
    return f"`{value}`" if key == "command" else str(value)


def _summary_table(report: dict[str, Any]) -> list[str]:
    estimators: list[str] = report["estimators"]
    results = report["results"]
    rankings = [results[e]["ranking"] for e in estimators]

    def overall(field: str, digits: int) -> list[str]:
        return [_number(results[e]["overall"][field], digits) for e in estimators]

    def ranking(field: str, digits: int) -> list[str]:
        return [_number(results[e]["ranking"][field], digits) for e in estimators]

    body = [
        ["MAPE %", *overall("mape", 1)],
        ["median APE %", *overall("median_ape", 1)],
        ["SD of APE % (ddof=0)", *overall("sd_ape", 1)],
        ["P95 APE %", *overall("p95_ape", 1)],
        ["P99 APE %", *overall("p99_ape", 1)],
        *[[f"within {t}% (% of rows)", *overall(f"within_{t}", 1)] for t in WITHIN_THRESHOLDS],
        ["bias % (mean signed error)", *overall("bias", 1)],
        ["Spearman (log latency)", *overall("spearman_log", 3)],
        ["Pearson (log latency)", *overall("pearson_log", 3)],
        ["ranking Spearman mean", *ranking("mean", 3)],
        ["ranking Spearman median", *ranking("median", 3)],
        ["ranking Spearman P10", *ranking("p10", 3)],
        ["ranked workloads (skipped)", *[f"{r['n_workloads']} ({r['skipped']})" for r in rankings]],
        ["n (rows with a prediction)", *[str(results[e]["overall"]["n"]) for e in estimators]],
        ["not run", *[str(results[e]["not_run"]["count"]) for e in estimators]],
    ]
    return _table(["metric", *estimators], body)


def _group_table(report: dict[str, Any], grouping: str, groups: Sequence[str]) -> list[str]:
    estimators: list[str] = report["estimators"]
    counts = report["group_rows"][grouping]
    body = []
    for group in groups:
        cells = []
        for estimator in estimators:
            summary = report["results"][estimator][f"by_{grouping}"][group]
            cells.append("—" if summary["mape"] is None else f"{summary['mape']:.1f} ({summary['n']})")
        body.append([group, str(counts[group]), *cells])
    return _table([grouping, "rows", *estimators], body)


def render_markdown(report: dict[str, Any]) -> str:
    """The report as markdown: meta, a side-by-side summary of all estimators, MAPE by group, rows not run."""
    meta: dict[str, Any] = report["meta"]
    keys = [k for k in META_ORDER if k in meta] + sorted(k for k in meta if k not in META_ORDER)
    lines = ["# Understudy evaluation", ""]
    lines += [f"- **{key}**: {_meta_value(key, meta[key])}" for key in keys]
    lines += [f"- **rows**: {report['n_rows']}", ""]

    lines += ["## Summary", "", "APE = |predicted - measured| / measured × 100, over the rows with a prediction.", ""]
    lines += [*_summary_table(report), ""]

    family_counts: dict[str, int] = report["group_rows"]["family"]
    top_families = sorted(family_counts, key=lambda f: (-family_counts[f], f))[:TOP_FAMILIES]
    sections = [
        ("By target", "target", list(report["group_rows"]["target"])),
        (f"By family (top {TOP_FAMILIES} by rows)", "family", top_families),
        ("By resolution", "resolution", list(report["group_rows"]["resolution"])),
        ("By mode", "mode", list(report["group_rows"]["mode"])),
    ]
    for title, grouping, groups in sections:
        lines += [f"## {title}", "", "MAPE % (rows with a prediction) per estimator.", ""]
        lines += [*_group_table(report, grouping, groups), ""]

    lines += ["## Rows not run", ""]
    not_run = [
        [estimator, item["model"], item["target"], item["workload_key"], item["outcome"], item["note"] or ""]
        for estimator in report["estimators"]
        for item in report["results"][estimator]["not_run"]["rows"]
    ]
    if not_run:
        lines += _table(["estimator", "model", "target", "workload", "outcome", "note"], not_run)
    else:
        lines.append("Every estimator gave a prediction for every row.")
    return "\n".join(lines) + "\n"


def _write_scatter(rows: Sequence[EvalRow], estimators: Sequence[str], path: Path) -> None:
    # Here, not at the top: matplotlib takes half a second to import, and only the plot needs it.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # A bare Figure on the Agg canvas: no pyplot state, no display, safe in worker threads.
    figure = Figure(figsize=(7, 7))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.set_xscale("log")
    axes.set_yscale("log")
    colours = [f"C{i % 10}" for i in range(len(estimators))]
    extremes: list[float] = []
    for index, estimator in enumerate(estimators):
        measured, predicted = paired(rows, estimator)
        if measured.size == 0:
            continue
        mape = error_summary(measured, predicted)["mape"]
        axes.scatter(
            measured,
            predicted,
            s=14,
            alpha=0.6,
            color=colours[index],
            marker=_MARKERS[index % len(_MARKERS)],
            label=f"{estimator} (n={measured.size}, MAPE {mape:.1f}%)",
        )
        extremes += [float(min(measured.min(), predicted.min())), float(max(measured.max(), predicted.max()))]
    if extremes:
        low, high = min(extremes) / 1.5, max(extremes) * 1.5
        band = BAND_PERCENT / 100
        line = np.array([low, high])
        axes.fill_between(
            line, line * (1 - band), line * (1 + band), color="grey", alpha=0.2, label=f"±{BAND_PERCENT}%"
        )
        axes.plot(line, line, color="black", linewidth=1, label="predicted = measured")
        axes.set_xlim(low, high)
        axes.set_ylim(low, high)
        axes.legend(loc="upper left", fontsize="small")
    else:
        axes.text(0.5, 0.5, "no predictions", transform=axes.transAxes, ha="center", va="center")
    axes.set_xlabel("measured latency (ms per step)")
    axes.set_ylabel("predicted latency (ms per step)")
    axes.set_title("Predicted vs measured latency")
    axes.grid(True, which="both", alpha=0.3)
    figure.savefig(path, dpi=120, bbox_inches="tight")


def _row_record(row: EvalRow, estimators: Sequence[str]) -> dict[str, Any]:
    record: dict[str, Any] = {column: getattr(row, column) for column in _ROW_COLUMNS}
    for estimator in estimators:
        value = row.prediction(estimator)
        record[f"{estimator}_predicted_ms"] = value
        record[f"{estimator}_ape"] = None if value is None else float(ape(row.measured_ms, value)[0])
        record[f"{estimator}_outcome"] = row.outcome_of(estimator)
    record["note"] = row.note
    return record


def _write_rows(rows: Sequence[EvalRow], estimators: Sequence[str], csv_path: Path, jsonl_path: Path) -> None:
    records = [_row_record(row, estimators) for row in rows]
    columns = [*_ROW_COLUMNS]
    for estimator in estimators:
        columns += [f"{estimator}_predicted_ms", f"{estimator}_ape", f"{estimator}_outcome"]
    columns.append("note")
    with csv_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        # None becomes an empty cell rather than the text 'None'.
        writer.writerows({k: "" if v is None else v for k, v in record.items()} for record in records)
    with jsonl_path.open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(record, allow_nan=False) + "\n" for record in records)


def write_report(
    report: dict[str, Any], rows: Sequence[EvalRow], estimators: Sequence[str], out_dir: Path
) -> list[Path]:
    """Write report.json, report.md, predicted_vs_measured.png, rows.csv and rows.jsonl into out_dir (created if
    needed); returns their paths in that order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / name for name in (REPORT_JSON, REPORT_MD, SCATTER_PNG, ROWS_CSV, ROWS_JSONL)]
    json_path, md_path, png_path, csv_path, jsonl_path = paths
    json_path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    md_path.write_text(render_markdown(report), encoding="utf-8")
    _write_scatter(rows, estimators, png_path)
    _write_rows(rows, estimators, csv_path, jsonl_path)
    return paths
