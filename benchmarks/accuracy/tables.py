"""Markdown tables of the accuracy reports, printed from their JSON files (so the README's figures are the runs'
own): leave-one-GPU-out for both estimators, the H200 self-prediction (the development workloads' set and the
training set), memory and its verdicts, the error band's coverage, and calibration.

    python benchmarks/accuracy/tables.py benchmarks/accuracy
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TIMM_LIMIT = {"hostaware": 10.0, "analytic": 15.0}
LAMBDA_LIMIT = {"hostaware": 12.0, "analytic": 20.0}


def _cell(score: dict | None, metric: str, limit: float, rows: bool) -> str:
    """One estimator's figure for one row: the metric, its bias, a mark past the issue's limit (and the row count)."""
    if score is None:
        return "—"
    mark = "" if score[metric] <= limit else " ✗"
    return f"{score[metric]:.1f} % ({score['bias']:+.0f} %){mark}" + (f" n={score['n']}" if rows else "")


def logo_tables(folder: Path) -> None:
    reports = {kind: json.loads((folder / f"{kind}-logo.json").read_text()) for kind in ("hostaware", "analytic")}
    tables = (("timm", "timm file (constants chosen without its GPU) | hostaware MAPE (bias), rows | analytic MAPE "
               "(bias), rows", "mape", TIMM_LIMIT, True),
              ("lambda", "Lambda GPU, precision (ratio to the RTX 3090) | hostaware ratio error | analytic ratio "
               "error", "ratio_error", LAMBDA_LIMIT, False))
    for index, (prefix, header, metric, limits, rows) in enumerate(tables):
        if index:
            print()
        print(f"| {header} |")
        print("|---|---|---|")
        for name in sorted(k for k in reports["analytic"]["scores"] if k.startswith(prefix)):
            cells = [_cell(reports[kind]["scores"].get(name), metric, limits[kind], rows)
                     for kind in ("hostaware", "analytic")]
            print(f"| {name.removeprefix('lambda ')} | {cells[0]} | {cells[1]} |")
    host = sorted(k for k in reports["analytic"]["scores"] if k.startswith("h200-host"))
    if host:
        print()
        print("| the H200's own rows, analytic with constants chosen on the two GeForce cards alone | rows "
              "| MAPE (bias) |")
        print("|---|---|---|")
        for name in host:
            score = reports["analytic"]["scores"][name]
            print(f"| {name} | {score['n']} | {score['mape']:.1f} % ({score['bias']:+.0f} %) |")


def self_table(folder: Path) -> None:
    for path, label in ((folder / "self" / "self-prediction.json", "self-prediction set"),
                        (folder / "training" / "self-prediction.json", "training set"),
                        (folder / "training" / "all-training.json", "every training workload")):
        if not path.exists():
            continue
        report = json.loads(path.read_text())
        print(f"| {label}: H200 predicting itself, analytic | workloads | MAPE | bias | worst "
              "| predicted / measured peak memory |")
        print("|---|---|---|---|---|---|")
        for name, score in report.items():
            print(f"| {name} | {score['n']} | {score['mape']:.1f} % | {score['bias']:+.1f} % | {score['worst']} | "
                  f"{score['memory_predicted_over_measured_median']} |")
        print()


def band_table(folder: Path) -> None:
    path = folder / "bands.json"
    if not path.exists():
        return
    report = json.loads(path.read_text())
    for check, title in (("coverage_leave_one_gpu_out", "the band fitted without the row's GPU"),
                         ("coverage_fitted_on_all", "the shipped band, fitted on every GPU's residuals")):
        groups = sorted(set(report["hostaware"][check]) | set(report["analytic"][check]))
        print(f"| rows ({title}) | hostaware: rows, coverage of the 80 % band, median half-width | analytic: rows, "
              "coverage, median half-width |")
        print("|---|---|---|")
        for group in groups:
            cells = []
            for kind in ("hostaware", "analytic"):
                score = report[kind][check].get(group)
                cells.append("—" if score is None else
                             f"{score['rows']}, {score['coverage']:.1f} %, {score['median_half_width']:.1f} %")
            print(f"| {group} | {cells[0]} | {cells[1]} |")
        print()


def verdict_table(folder: Path) -> None:
    report = json.loads((folder / "memory.json").read_text())
    if "verdicts" not in report:
        return
    margins = report["margins"]
    print(f"Margins: inference {margins['infer']['low']}-{margins['infer']['high']} x the predicted peak, training "
          f"{margins['train']['low']}-{margins['train']['high']} x.")
    print()
    print("| timm file | rows that ran: fits / tight / oom | batches one step above a back-off row (did not fit): "
          "fits / tight / oom |")
    print("|---|---|---|")
    for name, score in report["verdicts"].items():
        rows = [(name, score)]
        if "held_out_models" in score:
            rows.append((f"{name}, the half of its models the margin was not chosen on", score["held_out_models"]))
        for label, s in rows:
            cells = [f"{v['n']}: {v['fits']} / {v['tight']} / {v['oom']} %" if (v := s.get(key)) else "—"
                     for key in ("ran", "did_not_fit")]
            print(f"| {label} | {cells[0]} | {cells[1]} |")


def calibration_table(folder: Path) -> None:
    for kind in ("hostaware", "analytic"):
        path = folder / f"calibration-{kind}.json"
        if not path.exists():
            continue
        report = json.loads(path.read_text())
        print(f"| {kind}: timm file | rows | uncalibrated | k = 3 | k = 5 | k = 10 | fitted to every row | nine "
              "features fitted to every row (each row left out) |")
        print("|---|---|---|---|---|---|---|---|")
        for name, score in report["files"].items():
            ks = [score.get(f"k={k}", {}).get("mean") for k in (3, 5, 10)]
            floor = score.get("fitted_to_every_row_mape")
            features = score.get("nine_features_fitted_to_every_row_mape")
            richer = f"{features['in_sample']:.1f} % ({features['leave_one_out']:.1f} %)" if features else "—"
            print(f"| {name} | {score['rows']} | {score['uncalibrated_mape']:.1f} % | "
                  + " | ".join(f"{k:.1f} %" if k is not None else "—" for k in (*ks, floor)) + f" | {richer} |")
        print()
        transfer = report.get("measured_on_the_other_card") or {}
        if not transfer:
            continue
        weights = [key for key in next(iter(transfer.values())) if key.startswith("weight=")]
        print(f"| {kind}: timm file, the other card's file measured on it | its rows measured there | residuals' "
              "correlation | " + " | ".join(f"k = 0 / 5, {w.replace('=', ' ')}" for w in weights) + " |")
        print("|---|---|---|" + "---|" * len(weights))
        for name, score in transfer.items():
            print(f"| {name} | {score['rows_measured_there']} | {score['residual_correlation']:.2f} | "
                  + " | ".join(f"{score[w]['k=0']:.1f} / {score[w]['k=5']:.1f} %" for w in weights) + " |")
        print()
        if all("the_workload_alone_measured_there" in score for score in transfer.values()):
            print(f"| {kind}: timm file, each workload measured alone on the other card | rows | uncalibrated | "
                  "calibrated |")
            print("|---|---|---|---|")
            for name, score in transfer.items():
                alone = score["the_workload_alone_measured_there"]
                print(f"| {name} | {score['rows_measured_there']} | {alone['uncalibrated']:.1f} % | "
                      f"{alone['calibrated']:.1f} % |")
            print()


def memory_table(folder: Path) -> None:
    report = json.loads((folder / "memory.json").read_text())
    print("| timm file | back-off rows | both facts right | fits at the recorded batch | OOM at the next larger | "
          "rows at the usual batch called fitting |")
    print("|---|---|---|---|---|---|")
    for name, score in report["files"].items():
        rows = [(name, score)]
        if "held_out_models" in score:
            rows.append((f"{name}, the half of its models the training slack was not chosen on",
                         score["held_out_models"]))
        for label, s in rows:
            print(f"| {label} | {s['backoff_rows']} | {s['backoff_both_right']} % | {s['fits_at_recorded']} % | "
                  f"{s['oom_above']} % | {s['usual_batch_fit_right']} % of {s['usual_batch_rows']} |")


def main() -> None:
    folder = Path(sys.argv[1])
    for table in (logo_tables, self_table, memory_table, verdict_table, band_table, calibration_table):
        table(folder)
        print()


if __name__ == "__main__":
    main()
