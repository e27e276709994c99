"""understudy.param_counts: a model's parameter count without torch, for the size of an FL update."""

from __future__ import annotations

from understudy.param_counts import param_count
from understudy.workload import timm_model_names


def test_every_registered_model_has_a_count():
    assert all(param_count(name) is not None for name in timm_model_names())


def test_the_head_follows_the_classes_and_the_stem_the_channels():
    assert param_count("resnet18") == 11_689_512  # timm's resnet18, 1000 classes
    assert param_count("resnet18", num_classes=10) == 11_181_642  # 512 x 10 + 10 in the head
    assert param_count("resnet18", in_chans=1) == 11_689_512 - 2 * 64 * 7 * 7  # the 7x7 stem loses two channels


def test_a_model_the_table_does_not_hold_has_no_count():
    assert param_count("not_a_timm_model") is None


def test_torchvision_models_timm_lacks_have_counts_too():
    assert param_count("shufflenet_v2_x2_0") == 7_393_996  # FedScale's OpenImage model, torchvision's count
    assert param_count("shufflenet_v2_x2_0", num_classes=596) == 7_393_996 - 2049 * (1000 - 596)
    assert param_count("shufflenet_v2_x2_0", in_chans=1) is None  # torchvision's models take 3 channels
