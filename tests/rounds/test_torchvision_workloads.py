"""torchvision's classification models that timm lacks, as FL benchmarks train them (FedScale's OpenImage model is
shufflenet_v2_x2_0): accepted as workloads, built from torchvision and counted on the meta device like timm's."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from understudy.workload import Workload, model_source, torchvision_model_names


def test_fedscales_shufflenet_is_a_workload_built_from_torchvision():
    workload = Workload(model="shufflenet_v2_x2_0", batch_size=20, resolution=32, precision="fp32")
    assert model_source(workload.model) == "torchvision"
    assert model_source("resnet18") == "timm"  # a name both libraries have is timm's
    assert {"mobilenet_v2", "vit_b_16", "squeezenet1_1"} <= torchvision_model_names()


def test_a_torchvision_model_takes_three_input_channels():
    with pytest.raises(ValidationError, match="3 input channels"):
        Workload(model="shufflenet_v2_x2_0", in_chans=1)


def test_a_torchvision_training_step_is_counted_on_the_meta_device():
    from engine.counting import count_workload

    counts = count_workload(Workload(model="shufflenet_v2_x2_0", batch_size=20, resolution=32, precision="fp32",
                                     num_classes=596))
    assert counts.param_count == 7_393_996 - 2049 * (1000 - 596)
    assert len(counts.ops) > 100 and counts.kinds["depthwise"].ops > 0
