"""Error and ranking metrics against values worked out by hand in each test."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from evaluation.metrics import (
    ape,
    average_ranks,
    error_summary,
    grouped,
    pearson,
    ranking_summary,
    spearman,
)
from evaluation.rows import EvalRow

MakeRow = Callable[..., EvalRow]

# APE = |11-10|/10*100 = 10, |18-20|/20*100 = 10, |40-40|/40*100 = 0
MEASURED = [10.0, 20.0, 40.0]
PREDICTED = [11.0, 18.0, 40.0]


def test_ape_is_absolute_error_as_percent_of_measured() -> None:
    assert ape(MEASURED, PREDICTED).tolist() == [10.0, 10.0, 0.0]


def test_mape_is_the_mean_ape() -> None:
    # (10 + 10 + 0) / 3 = 6.667
    assert error_summary(MEASURED, PREDICTED)["mape"] == pytest.approx(20 / 3)


def test_median_ape_is_the_middle_error() -> None:
    # sorted APE [0, 10, 10] -> 10
    assert error_summary(MEASURED, PREDICTED)["median_ape"] == pytest.approx(10.0)


def test_within_shares_are_percent_of_rows_at_or_under_the_threshold() -> None:
    summary = error_summary(MEASURED, PREDICTED)
    # only the 0% error is <= 5 -> 1/3; all three are <= 10, 20, 50
    assert summary["within_5"] == pytest.approx(100 / 3)
    assert summary["within_10"] == pytest.approx(100.0)
    assert summary["within_20"] == pytest.approx(100.0)
    assert summary["within_50"] == pytest.approx(100.0)


def test_an_error_exactly_on_a_threshold_counts_as_within_despite_float_rounding() -> None:
    # 100 * |7.7 - 7| / 7 is 10.000000000000002 in binary floating point; in decimal it is exactly 10
    assert error_summary([7.0], [7.7])["within_10"] == 100.0


def test_sd_ape_is_the_population_standard_deviation() -> None:
    # mean 20/3; deviations 10/3, 10/3, -20/3; squares sum to 100/9 + 100/9 + 400/9 = 600/9;
    # / n=3 (ddof=0) -> 200/9; sqrt -> 4.714 (ddof=1 would be sqrt(100/3) = 5.774)
    assert error_summary(MEASURED, PREDICTED)["sd_ape"] == pytest.approx(math.sqrt(200 / 9))


def test_p95_and_p99_interpolate_linearly_between_ranked_errors() -> None:
    # APE [0, 10, 20, 30, 40]; p95 sits at position 0.95 * 4 = 3.8 -> 30 + 0.8 * 10 = 38;
    # p99 at 0.99 * 4 = 3.96 -> 30 + 0.96 * 10 = 39.6
    summary = error_summary([100.0] * 5, [100.0, 110.0, 120.0, 130.0, 140.0])
    assert summary["p95_ape"] == pytest.approx(38.0)
    assert summary["p99_ape"] == pytest.approx(39.6)


def test_bias_is_the_mean_signed_percentage_error() -> None:
    # (12-10)/10*100 = +20, (9-10)/10*100 = -10 -> mean +5 (predictions run slow on average)
    assert error_summary([10.0, 10.0], [12.0, 9.0])["bias"] == pytest.approx(5.0)


def test_pearson_log_correlates_log_latencies() -> None:
    # log10: x = [0, 1, 2], y = [0, 2, 3]; deviations dx = [-1, 0, 1], dy = [-5/3, 1/3, 4/3]
    # sum dx*dy = 5/3 + 4/3 = 3; sum dx^2 = 2; sum dy^2 = (25 + 1 + 16)/9 = 14/3
    # r = 3 / sqrt(2 * 14/3) = 0.98198 (on the raw values it would be 0.99997); the log base does not matter
    summary = error_summary([1.0, 10.0, 100.0], [1.0, 100.0, 1000.0])
    assert summary["pearson_log"] == pytest.approx(3 / math.sqrt(28 / 3))


def test_spearman_log_is_one_for_predictions_in_the_measured_order() -> None:
    # ranks [1, 2, 3] on both sides whatever the spacing
    assert error_summary([1.0, 10.0, 100.0], [5.0, 6.0, 500.0])["spearman_log"] == pytest.approx(1.0)


def test_error_summary_of_no_pairs_has_n_zero_and_no_statistics() -> None:
    summary = error_summary([], [])
    assert summary["n"] == 0
    assert all(value is None for key, value in summary.items() if key != "n")


def test_correlations_need_two_pairs() -> None:
    summary = error_summary([10.0], [12.0])
    assert summary["spearman_log"] is None
    assert summary["pearson_log"] is None


def test_error_summary_rejects_a_non_positive_latency() -> None:
    with pytest.raises(ValueError, match="predicted"):
        error_summary([10.0], [0.0])


def test_average_ranks_give_tied_values_the_mean_of_their_ranks() -> None:
    # 2 and 2 occupy ranks 2 and 3 -> both 2.5; 5, 5, 5 occupy 4, 5, 6 -> 5
    assert average_ranks([1.0, 2.0, 2.0, 5.0, 5.0, 5.0]).tolist() == [1.0, 2.5, 2.5, 5.0, 5.0, 5.0]
    assert average_ranks([3.0, 1.0, 2.0]).tolist() == [3.0, 1.0, 2.0]


def test_spearman_with_ties_is_pearson_of_average_ranks() -> None:
    # ranks x = [1, 2.5, 2.5, 4], y = [1, 3, 2, 4], both with mean 2.5
    # dx = [-1.5, 0, 0, 1.5], dy = [-1.5, 0.5, -0.5, 1.5]
    # sum dx*dy = 2.25 + 2.25 = 4.5; sum dx^2 = 4.5; sum dy^2 = 2.25 + 0.25 + 0.25 + 2.25 = 5
    # rho = 4.5 / sqrt(4.5 * 5) = sqrt(0.9) = 0.948683
    assert spearman([1.0, 2.0, 2.0, 3.0], [1.0, 3.0, 2.0, 4.0]) == pytest.approx(math.sqrt(0.9))


def test_spearman_of_a_reversed_order_is_minus_one() -> None:
    assert spearman([1.0, 2.0, 3.0], [30.0, 20.0, 10.0]) == pytest.approx(-1.0)


def test_correlation_with_a_constant_vector_is_none() -> None:
    assert spearman([1.0, 2.0, 3.0], [4.0, 4.0, 4.0]) is None
    assert pearson([4.0, 4.0], [1.0, 2.0]) is None


def test_ranking_summary_scores_each_workload_across_its_targets(make_row: MakeRow) -> None:
    rows = [
        # w1: measured [1, 2, 3] ranks [1, 2, 3]; predicted [1.5, 1.0, 3.5] ranks [2, 1, 3]
        # d = [-1, 1, 0], sum d^2 = 2 -> rho = 1 - 6*2 / (3 * (9 - 1)) = 0.5
        make_row("A", 1.0, {"e": 1.5}, workload_key="w1"),
        make_row("B", 2.0, {"e": 1.0}, workload_key="w1"),
        make_row("C", 3.0, {"e": 3.5}, workload_key="w1"),
        # w2: two targets in the wrong order -> -1
        make_row("A", 5.0, {"e": 8.0}, workload_key="w2"),
        make_row("B", 10.0, {"e": 6.0}, workload_key="w2"),
    ]
    summary = ranking_summary(rows, "e")
    # values [-1, 0.5]: mean = median = -0.25; p10 at position 0.1 * 1 -> -1 + 0.1 * 1.5 = -0.85
    assert summary["n_workloads"] == 2
    assert summary["mean"] == pytest.approx(-0.25)
    assert summary["median"] == pytest.approx(-0.25)
    assert summary["p10"] == pytest.approx(-0.85)
    assert summary["skipped"] == 0


def test_ranking_summary_skips_and_counts_a_workload_with_constant_predictions(make_row: MakeRow) -> None:
    rows = [
        make_row("A", 1.0, {"e": 2.0}, workload_key="w1"),
        make_row("B", 2.0, {"e": 2.0}, workload_key="w1"),
        make_row("A", 1.0, {"e": 1.0}, workload_key="w2"),
        make_row("B", 2.0, {"e": 3.0}, workload_key="w2"),
    ]
    summary = ranking_summary(rows, "e")
    assert summary["n_workloads"] == 1
    assert summary["mean"] == pytest.approx(1.0)
    assert summary["skipped"] == 1


def test_ranking_summary_leaves_out_workloads_with_one_predicted_target(make_row: MakeRow) -> None:
    rows = [
        make_row("A", 1.0, {"e": 1.0}, workload_key="w1"),
        make_row("B", 2.0, {"e": None}, workload_key="w1"),
        make_row("A", 3.0, {"e": 3.0}, workload_key="w2"),
    ]
    summary = ranking_summary(rows, "e")
    assert summary == {"n_workloads": 0, "mean": None, "median": None, "p10": None, "skipped": 0}


def test_ranking_summary_averages_rows_repeating_a_target(make_row: MakeRow) -> None:
    rows = [
        # target A measured twice: mean measured (1 + 5)/2 = 3 > B's 2, mean predicted (1 + 3)/2 = 2 > B's 1.5
        make_row("A", 1.0, {"e": 1.0}, workload_key="w"),
        make_row("A", 5.0, {"e": 3.0}, workload_key="w"),
        make_row("B", 2.0, {"e": 1.5}, workload_key="w"),
    ]
    summary = ranking_summary(rows, "e")
    assert summary["n_workloads"] == 1
    assert summary["mean"] == pytest.approx(1.0)


def test_grouped_summarises_each_group_in_name_order_with_numbers_numerically(make_row: MakeRow) -> None:
    rows = [
        make_row("A", 10.0, {"e": 11.0}, resolution=224),  # APE 10
        make_row("A", 10.0, {"e": 13.0}, resolution=96),  # APE 30
        make_row("A", 10.0, {"e": 15.0}, resolution=96),  # APE 50
    ]
    groups = grouped(rows, "e", lambda row: str(row.resolution))
    assert list(groups) == ["96", "224"]
    assert groups["96"]["mape"] == pytest.approx(40.0)  # (30 + 50) / 2
    assert groups["224"]["n"] == 1


def test_grouped_keeps_a_group_without_predictions_with_n_zero(make_row: MakeRow) -> None:
    rows = [make_row("A", 10.0, {"e": 11.0}), make_row("B", 10.0, {"e": None})]
    groups = grouped(rows, "e", lambda row: row.target)
    assert groups["B"]["n"] == 0
    assert groups["B"]["mape"] is None
