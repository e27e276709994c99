"""The workload spec: validation with errors a user can act on, and a digest that names the workload, not its
spelling."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from understudy.errors import InvalidWorkload
from understudy.workload import (OPTIMIZER_DEFAULTS, Workload, check_model_name, sha256_of, timm_model_names,
                                 workload_from_row)


def test_unknown_model_lists_close_matches() -> None:
    with pytest.raises(ValidationError) as info:
        Workload(model="resnet5")
    message = str(info.value)
    assert "unknown timm model 'resnet5'" in message
    assert "close matches: resnet50" in message


def test_unknown_model_error_names_the_model_field() -> None:
    with pytest.raises(InvalidWorkload) as info:
        check_model_name("vit_base_patch16_244")
    assert info.value.field == "model"
    assert "vit_base_patch16_224" in str(info.value)


def test_model_name_with_no_close_match_still_says_it_is_unknown() -> None:
    with pytest.raises(InvalidWorkload, match="unknown timm model 'zzzzzz'$"):
        check_model_name("zzzzzz")


def test_model_list_is_timms_registry() -> None:
    names = timm_model_names()
    assert len(names) > 1000
    assert {"resnet18", "resnet50", "vit_base_patch16_224", "mobilenetv3_small_050", "test_vit"} <= names


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("batch_size", 0),
        ("batch_size", 4097),
        ("resolution", 4),
        ("resolution", 5000),
        ("resolution", [224]),
        ("resolution", [224, 224, 3]),
        ("resolution", [224.5, 224]),
        ("precision", "fp8"),
        ("mode", "eval"),
        ("memory_format", "chw"),
        ("optimizer", "lamb"),
        ("lr", 0),
        ("momentum", 1.0),
        ("in_chans", 0),
        ("num_classes", 0),
        ("pretrained", True),
    ],
)
def test_out_of_range_or_unknown_fields_are_rejected(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        Workload(model="resnet18", **{field: value})
    assert info.value.errors()[0]["loc"][0] == field


def test_optimizer_without_momentum_rejects_a_momentum() -> None:
    with pytest.raises(ValidationError, match="optimizer 'adamw' takes no momentum"):
        Workload(model="resnet18", optimizer="adamw", momentum=0.9)


def test_square_resolution_may_be_given_as_one_side() -> None:
    assert Workload(model="resnet18", resolution=160).resolution == (160, 160)
    assert Workload(model="resnet18", resolution=[160, 128]).resolution == (160, 128)


def test_same_workload_with_other_key_order_has_the_same_digest() -> None:
    fields = {"model": "resnet18", "mode": "train", "batch_size": 64, "precision": "amp-bf16", "optimizer": "adamw"}
    reordered = dict(reversed(list(fields.items())))
    assert list(reordered) != list(fields)
    assert Workload.model_validate(fields).digest() == Workload.model_validate(reordered).digest()


def test_defaults_spelled_out_give_the_same_digest() -> None:
    short = Workload(model="resnet18")
    spelled = Workload.model_validate(
        {
            "weight_decay": 1e-4,
            "momentum": 0.9,
            "lr": 0.1,
            "optimizer": "sgd",
            "memory_format": "nchw",
            "precision": "amp-fp16",
            "num_classes": 1000,
            "in_chans": 3,
            "resolution": [224, 224],
            "batch_size": 32,
            "mode": "train",
            "model": "resnet18",
        }
    )
    assert spelled.digest() == short.digest()
    assert Workload(model="resnet18", resolution=224).digest() == short.digest()


@pytest.mark.parametrize("optimizer", ["sgd", "sgd-nesterov", "adamw"])
def test_each_optimizers_defaults_are_part_of_the_canonical_form(optimizer: str) -> None:
    implicit = Workload(model="resnet18", optimizer=optimizer)
    explicit = Workload(model="resnet18", optimizer=optimizer, **OPTIMIZER_DEFAULTS[optimizer])
    assert implicit.digest() == explicit.digest()
    assert {key: implicit.canonical()[key] for key in OPTIMIZER_DEFAULTS[optimizer]} == OPTIMIZER_DEFAULTS[optimizer]


def test_whole_numbers_and_floats_give_the_same_digest() -> None:
    assert Workload(model="resnet18", lr=1, weight_decay=0).digest() == Workload(
        model="resnet18", lr=1.0, weight_decay=0.0
    ).digest()


def test_inference_ignores_optimizer_fields() -> None:
    plain = Workload(model="resnet18", mode="infer")
    with_optimizer = Workload(model="resnet18", mode="infer", optimizer="adamw", lr=0.5, weight_decay=0.1)
    with_momentum = Workload(model="resnet18", mode="infer", optimizer="sgd", momentum=0.5)
    assert plain.digest() == with_optimizer.digest() == with_momentum.digest()
    assert plain.canonical()["optimizer"] == "none"
    assert not {"lr", "momentum", "weight_decay"} & set(plain.canonical())


def test_a_different_hyperparameter_is_a_different_workload() -> None:
    assert Workload(model="resnet18", lr=0.05).digest() != Workload(model="resnet18").digest()
    assert Workload(model="resnet18", momentum=0.0).digest() != Workload(model="resnet18").digest()


@pytest.mark.parametrize(
    "change",
    [{"batch_size": 64}, {"resolution": 256}, {"precision": "fp32"}, {"mode": "infer"}, {"memory_format": "nhwc"},
     {"model": "resnet18d"}, {"in_chans": 1}, {"num_classes": 10}, {"optimizer": "adamw"},
     {"torch_major": 1}, {"compile": True}],
)
def test_every_field_that_changes_the_step_changes_the_digest(change: dict[str, object]) -> None:
    changed = Workload.model_validate({"model": "resnet18", **change})
    assert changed.digest() != Workload(model="resnet18").digest()


def test_torch_major_at_its_default_is_left_out_of_the_canonical_form() -> None:
    # So every workload keeps the digest (and cached predictions) it had before the field existed.
    assert "torch_major" not in Workload(model="vit_tiny_patch16_224").canonical()
    assert Workload(model="vit_tiny_patch16_224", torch_major=1).canonical()["torch_major"] == 1


@pytest.mark.parametrize(
    ("software", "major"),
    [("torch 1.12 cu113", 1), ("torch 2.4.0 cu124", 2), ("NGC PyTorch 22.09/22.10", 1), ("NGC PyTorch 24.01", 2),
     ("", 2)],
)
def test_a_ground_truth_rows_pytorch_generation_comes_from_its_software_column(software: str, major: int) -> None:
    row = {"model": "vit_tiny_patch16_224", "mode": "train", "batch_size": "8", "resolution": "224",
           "precision": "amp-fp16", "memory_format": "nchw", "optimizer": "sgd", "software": software}
    assert workload_from_row(row).torch_major == major


def test_reparam_of_a_model_with_branches_to_fold_is_another_workload() -> None:
    plain = Workload(model="repvgg_a0", mode="infer")
    folded = Workload(model="repvgg_a0", mode="infer", reparam=True)
    assert folded.digest() != plain.digest()
    assert folded.canonical()["reparam"] is True
    # Left out at its default, so every workload keeps the digest it had before the field existed.
    assert "reparam" not in plain.canonical()


def test_reparam_of_a_model_with_nothing_to_fold_is_the_plain_workload() -> None:
    assert Workload(model="resnet18", mode="infer", reparam=True) == Workload(model="resnet18", mode="infer")


def test_reparam_is_for_inference() -> None:
    with pytest.raises(ValidationError, match="reparam is for inference"):
        Workload(model="repvgg_a0", mode="train", reparam=True)


@pytest.mark.parametrize(
    ("software", "source", "reparam"),
    [("torch 2.9.1 cu128", "huggingface/pytorch-image-models results/benchmark-infer-amp-nchw-pt291-cu128-4090.csv",
      True),
     ("torch 2.4.0 cu124", "huggingface/pytorch-image-models results/benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv",
      False),
     ("torch 2.9.1 cu128", "some other harness", False)],
)
def test_timm_benchmark_rows_from_pytorch_2_9_on_are_reparameterized(software: str, source: str,
                                                                      reparam: bool) -> None:
    row = {"model": "repvgg_a0", "mode": "infer", "batch_size": "8", "resolution": "224", "precision": "amp-fp16",
           "memory_format": "nchw", "optimizer": "none", "software": software, "source": source}
    assert workload_from_row(row).reparam is reparam


def test_a_row_that_says_it_was_measured_folded_is_a_reparam_workload() -> None:
    row = {"model": "repvgg_a0", "mode": "infer", "batch_size": "8", "resolution": "224", "precision": "amp-fp16",
           "memory_format": "nchw", "optimizer": "none", "reparam": "true"}
    assert workload_from_row(row).reparam is True
    assert workload_from_row({**row, "reparam": "false"}).reparam is False


def test_a_compiled_workload_is_another_workload_and_an_eager_one_keeps_its_digest() -> None:
    eager = Workload(model="resnet18", mode="infer")
    compiled = Workload(model="resnet18", mode="infer", compile=True)
    assert compiled.canonical()["compile"] is True and compiled.digest() != eager.digest()
    # Left out at its default, so every workload keeps the digest (and cached predictions) it had before.
    assert "compile" not in eager.canonical()
    assert eager.digest() == Workload(model="resnet18", mode="infer", compile=False).digest()
    assert eager.digest() == "d50219358ae48e20f0fe367c04263136a57369195498a2f4a42517015cae7880"


def test_compile_needs_pytorch_2() -> None:
    with pytest.raises(ValidationError, match="compile needs PyTorch 2"):
        Workload(model="resnet18", compile=True, torch_major=1)


@pytest.mark.parametrize(
    ("software", "compiled"),
    [("torch 2.9.1 cu128 torch.compile (inductor)", True), ("torch 2.9.1 cu128", False), ("", False)],
)
def test_a_ground_truth_row_is_compiled_when_its_software_column_says_torch_compile(software: str,
                                                                                   compiled: bool) -> None:
    row = {"model": "repvgg_a0", "mode": "infer", "batch_size": "1024", "resolution": "224", "precision": "amp-fp16",
           "memory_format": "nchw", "optimizer": "none", "software": software,
           "source": "huggingface/pytorch-image-models results/benchmark-infer-amp-nchw-pt291-cu128-4090-dynamo.csv"}
    workload = workload_from_row(row)
    assert workload.compile is compiled
    # timm's compiled runs are its eager runs compiled: reparameterized alike.
    assert workload.reparam is (software != "")


def test_a_row_that_says_it_was_measured_compiled_is_a_compiled_workload() -> None:
    row = {"model": "resnet18", "mode": "infer", "batch_size": "8", "resolution": "224", "precision": "amp-fp16",
           "memory_format": "nchw", "optimizer": "none", "compile": "true"}
    assert workload_from_row(row).compile is True
    assert workload_from_row({**row, "compile": "false"}).compile is False


def test_canonical_form_round_trips_to_the_same_workload() -> None:
    for workload in (Workload(model="test_vit", mode="infer", resolution=[160, 128]),
                     Workload(model="resnet18", optimizer="sgd-nesterov", batch_size=8),
                     Workload(model="vit_tiny_patch16_224", torch_major=1),
                     Workload(model="repvgg_a0", mode="infer", reparam=True),
                     Workload(model="resnet18", compile=True)):
        again = Workload.model_validate(workload.canonical())
        assert again == workload
        assert again.digest() == workload.digest()


def test_digest_is_the_sha256_of_sorted_compact_json() -> None:
    workload = Workload(model="resnet18", mode="infer")
    assert workload.digest() == sha256_of(workload.canonical())
    # Pinned: a change here silently orphans every cached prediction, so it must be deliberate.
    assert sha256_of({"b": [1, 2], "a": 1.5}) == sha256_of({"a": 1.5, "b": [1, 2]})
    assert workload.digest() == "d50219358ae48e20f0fe367c04263136a57369195498a2f4a42517015cae7880"


def test_workload_is_immutable() -> None:
    workload = Workload(model="resnet18")
    with pytest.raises(ValidationError):
        workload.batch_size = 64  # type: ignore[misc]


def test_label_is_short_and_human() -> None:
    workload = Workload(model="resnet18", batch_size=8, resolution=[160, 128])
    assert workload.label == "resnet18 train amp-fp16 b8 160x128px"
    assert Workload(model="repvgg_a0", mode="infer", reparam=True).label.endswith(" reparam")
    assert Workload(model="resnet18", mode="infer", compile=True).label.endswith(" compiled")
