"""The memory verdict (engine.estimators.memory.verdict): the predicted peak's band against the target's memory.
fits while the band's high end is at or under the capacity, oom only once its low end is over it, tight between. A
known band model (conftest): a 16 GiB peak's band is 12-20 GiB for inference and 8-24 GiB for training."""

from __future__ import annotations

import pytest

from understudy.bands import BandModel
from understudy.catalog import catalog
from understudy.workload import Workload
from engine.estimators.memory import MemoryEstimate, verdict

PEAK = MemoryEstimate(weights_gb=1.0, optimizer_gb=2.0, activations_gb=12.0, overhead_gb=1.0)  # 16 GiB
INFER = Workload(model="resnet18", mode="infer")
TRAIN = Workload(model="resnet18", mode="train")


def on(capacity_gb: float):  # type: ignore[no-untyped-def]
    return catalog().get("rtx-3090").model_copy(update={"memory_size_gb": capacity_gb})


@pytest.mark.parametrize(("capacity_gb", "expected"), [
    (40.0, "fits"),
    (20.0, "fits"),    # the band's high end exactly at the capacity
    (19.99, "tight"),
    (16.0, "tight"),   # the predicted peak itself
    (12.0, "tight"),   # the band's low end exactly at the capacity: it may still fit
    (11.99, "oom"),
    (4.0, "oom"),
])
def test_the_verdict_at_and_around_the_bands_ends(known_model: BandModel, capacity_gb: float, expected: str) -> None:
    assert verdict(PEAK, INFER, on(capacity_gb), known_model).verdict == expected


def test_a_training_step_takes_the_training_margin(known_model: BandModel) -> None:
    # 22 GiB: above the inference band's 20, inside the training band's 8-24.
    assert verdict(PEAK, INFER, on(22.0), known_model).verdict == "fits"
    assert verdict(PEAK, TRAIN, on(22.0), known_model).verdict == "tight"
    assert verdict(PEAK, TRAIN, on(7.9), known_model).verdict == "oom"


def test_the_verdict_records_the_peak_its_band_the_capacity_and_the_parts(known_model: BandModel) -> None:
    memory = verdict(PEAK, INFER, on(24.0), known_model)
    assert (memory.peak_gb, memory.low_gb, memory.high_gb, memory.capacity_gb) == (16.0, 12.0, 20.0, 24.0)
    assert memory.parts_gb == {"weights": 1.0, "optimizer": 2.0, "activations": 12.0, "overhead": 1.0}


@pytest.mark.parametrize(("capacity_gb", "words"), [
    (24.0, "fits 16.0 GB"),
    (16.0, "tight 12.0-20.0 GB of 16"),
    (11.0, "oom >= 12.0 GB"),
])
def test_each_verdict_reads_in_a_few_words(known_model: BandModel, capacity_gb: float, words: str) -> None:
    assert verdict(PEAK, INFER, on(capacity_gb), known_model).describe() == words
