"""Scoring latency predictions against measured ground truth and writing the evaluation report (no torch)."""

from evaluation.groundtruth import load_groundtruth, sample_rows
from evaluation.metrics import error_summary, grouped, ranking_summary, spearman
from evaluation.report import build_report, write_report
from evaluation.rows import EvalRow, model_family

__all__ = [
    "EvalRow",
    "build_report",
    "error_summary",
    "grouped",
    "load_groundtruth",
    "model_family",
    "ranking_summary",
    "sample_rows",
    "spearman",
    "write_report",
]
