"""Model families and the checks an EvalRow makes on what the runner hands it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import ValidationError

from evaluation.rows import EvalRow, model_family

MakeRow = Callable[..., EvalRow]


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("resnet50", "resnet"),
        ("resnet50d", "resnet"),
        ("resnet50x16_clip", "resnet"),
        ("resnetv2_50x1_bit", "resnetv2"),
        ("vit_small_patch16_224", "vit"),
        ("efficientnet_b0", "efficientnet"),
        ("convnext_tiny", "convnext"),
        ("mobilenetv3_large_100", "mobilenetv3"),
        ("swinv2_tiny_window8_256", "swinv2"),
        ("seresnext26ts", "seresnext"),
        ("dla102x2", "dla"),
        ("res2net50d", "res2net"),
        ("cs3darknet_m", "cs3darknet"),
        ("deit3_small_patch16_224", "deit"),
        ("ResNet50", "resnet"),
    ],
)
def test_family_is_the_first_name_part_without_its_size_code(name: str, family: str) -> None:
    assert model_family(name) == family


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("tf_efficientnet_b0", "efficientnet"),
        ("gluon_resnet50_v1b", "resnet"),
        ("legacy_seresnet50", "seresnet"),
        ("ens_adv_inception_resnet_v2", "inception"),
        ("dm_nfnet_f0", "nfnet"),
    ],
)
def test_family_ignores_weight_origin_prefixes(name: str, family: str) -> None:
    assert model_family(name) == family


def test_family_keeps_digits_that_would_leave_fewer_than_three_letters() -> None:
    # stripping '3se' from cs3se would leave 'cs', which names nothing
    assert model_family("cs3se_edgenet_x") == "cs3se"


def test_row_takes_its_family_from_the_model_name_when_not_given(make_row: MakeRow) -> None:
    assert make_row("A", 10.0, {}, model="tf_efficientnet_b0").family == "efficientnet"


def test_a_non_positive_prediction_becomes_a_failed_row_with_a_note(make_row: MakeRow) -> None:
    row = make_row("A", 10.0, {"e": 0.0}, outcome={"e": "done"}, note="slow host")
    assert (row.prediction("e"), row.outcome_of("e")) == (None, "failed")
    assert row.note == "slow host; e: unusable prediction 0.0"


def test_a_nan_prediction_becomes_a_failed_row(make_row: MakeRow) -> None:
    row = make_row("A", 10.0, {"e": float("nan")}, outcome={"e": "done"})
    assert (row.prediction("e"), row.outcome_of("e")) == (None, "failed")


def test_a_done_outcome_without_a_prediction_becomes_failed(make_row: MakeRow) -> None:
    row = make_row("A", 10.0, {"e": None}, outcome={"e": "done"})
    assert row.outcome_of("e") == "failed"
    assert row.note == "e: done without a prediction"


def test_a_prediction_beside_an_oom_outcome_is_dropped_and_the_oom_kept(make_row: MakeRow) -> None:
    row = make_row("A", 10.0, {"e": 9.0}, outcome={"e": "oom"})
    assert (row.prediction("e"), row.outcome_of("e")) == (None, "oom")


def test_a_row_rejects_a_non_positive_measurement(make_row: MakeRow) -> None:
    with pytest.raises(ValidationError, match="measured_ms"):
        make_row("A", 0.0, {"e": 9.0})


def test_an_estimator_the_row_never_mentions_counts_as_skipped(make_row: MakeRow) -> None:
    assert make_row("A", 10.0, {"e": 9.0}).outcome_of("other") == "skipped"
