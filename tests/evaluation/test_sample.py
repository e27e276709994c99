"""Choosing the evaluation's sample: shards split one sample between processes without overlap."""

from __future__ import annotations

import pytest

from evaluation.evaluate import Plan, take_shard

PLANS = [Plan(key=f"w{i}") for i in range(7)]


def test_shards_together_cover_the_sample_once() -> None:
    shards = [take_shard(PLANS, f"{k}/3") for k in range(3)]
    keys = [plan.key for shard in shards for plan in shard]
    assert sorted(keys) == sorted(plan.key for plan in PLANS)
    assert [len(shard) for shard in shards] == [3, 2, 2]


def test_one_shard_of_one_is_the_whole_sample() -> None:
    assert take_shard(PLANS, "0/1") == PLANS


@pytest.mark.parametrize("shard", ["2/2", "-1/2", "1", "a/b", "0/0"])
def test_a_malformed_shard_is_refused_with_the_expected_form(shard: str) -> None:
    with pytest.raises(ValueError, match="expected K/N"):
        take_shard(PLANS, shard)


def _rows(mode: str, count: int) -> list[dict[str, str]]:
    return [{"model": f"{mode}{i}", "mode": mode, "target": "GeForce RTX 3090", "precision": "amp-fp16",
             "batch_size": "8", "resolution": "224", "memory_format": "nchw", "optimizer": "none"}
            for i in range(count)]


def test_a_modes_sample_does_not_depend_on_the_other_modes_rows() -> None:
    from evaluation.evaluate import plan_sample

    train_only = {plan.key for plan in plan_sample(_rows("train", 30), 10, seed=0)}
    with_infer = {plan.key for plan in plan_sample(_rows("infer", 40) + _rows("train", 30), 10, seed=0)
                  if plan.rows[0]["mode"] == "train"}
    assert train_only == with_infer


def test_a_model_one_file_ran_folded_and_another_plain_is_two_plans() -> None:
    from evaluation.evaluate import plan_sample

    row = {"model": "repvgg_a2", "mode": "infer", "precision": "amp-fp16", "batch_size": "1024",
           "resolution": "224", "memory_format": "nchw", "optimizer": "none",
           "source": "huggingface/pytorch-image-models results/benchmark-infer-amp-nchw.csv"}
    plain = {**row, "target": "GeForce RTX 3090", "software": "torch 2.4.0 cuda 12.4"}
    folded = {**row, "target": "GeForce RTX 4090", "software": "torch 2.9.1 cuda 12.8"}
    plans = plan_sample([plain, folded], None, seed=0)
    assert sorted(plan.key.endswith("|reparam") for plan in plans) == [False, True]
    assert all(len(plan.rows) == 1 for plan in plans)


def test_a_model_run_compiled_and_run_eagerly_is_two_plans() -> None:
    from evaluation.evaluate import plan_sample

    row = {"model": "resnet18", "mode": "infer", "precision": "amp-fp16", "batch_size": "1024", "resolution": "224",
           "memory_format": "nchw", "optimizer": "none", "target": "GeForce RTX 4090", "source": "a harness"}
    eager = {**row, "software": "torch 2.9.1 cu128"}
    compiled = {**row, "software": "torch 2.9.1 cu128 torch.compile (inductor)"}
    plans = plan_sample([eager, compiled], None, seed=0)
    assert sorted(plan.key.endswith("|compile") for plan in plans) == [False, True]
