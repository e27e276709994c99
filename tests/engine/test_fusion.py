"""A compiled step's kernels, as engine.fusion derives them from the eager trace: which passes over memory inductor's
fusion leaves, and when it runs convolutions channels-last."""

from __future__ import annotations

import pytest
import torch

from understudy.workload import Workload
from engine.counting import _CountingMode, count_workload
from engine.fusion import Conv, FusionTrace, fuse, layout_optimized

HALF = 2  # bytes per fp16 element


class _Block(torch.nn.Module):
    """conv -> BatchNorm -> ReLU, then conv -> BatchNorm, plus the first ReLU's output, -> ReLU: a ResNet block."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor, residual: bool = True) -> torch.Tensor:
        first = torch.relu_(self.bn1(self.conv1(x)))
        if not residual:
            return first
        return torch.relu_(self.bn2(self.conv2(first)) + first)


def _compiled_kernels(residual: bool, channels_first: bool = True) -> tuple[list[tuple[str, float, float]], float]:
    """The block's inference traced on the meta device in fp16 and fused: its kernels and activation bytes."""
    block = _Block(16).to(device="meta", dtype=torch.float16).eval()
    x = torch.empty(8, 16, 32, 32, device="meta", dtype=torch.float16)
    trace = FusionTrace()
    hooks = trace.watch(block)
    with torch.no_grad(), _CountingMode(channels_first=channels_first, fusion=trace):
        out = block(x, residual)
        alive = trace.alive()
    del out
    for hook in hooks:
        hook.remove()
    activation = x.numel() * HALF
    return fuse(trace, alive, graph_inputs=9, training=False).ops, activation


def test_conv_batchnorm_relu_is_the_convolution_and_one_pass_over_its_output() -> None:
    kernels, activation = _compiled_kernels(residual=False)
    params = 4 * 16 * HALF  # BatchNorm's weight, bias, mean and variance
    weights = 16 * 16 * 3 * 3 * HALF
    # The convolution reads its input and weights and writes its output; BatchNorm and the in-place ReLU become one
    # kernel reading the convolution's output (and BatchNorm's parameters) and writing the ReLU's, where eagerly each
    # read and wrote the whole activation. A 16-channel convolution runs channels-last (inductor's "small" kind), so
    # no NCHW conversions are left around it.
    assert [(kind, moved) for kind, _, moved in kernels] == [
        ("tensor", activation + weights + activation),
        ("fused", activation + params + activation),
    ]


def test_a_residual_add_joins_the_second_batchnorm_and_reads_the_first_relus_output_from_memory() -> None:
    kernels, activation = _compiled_kernels(residual=True)
    params = 4 * 16 * HALF
    # The first ReLU's output goes to the second convolution, a library kernel, so its kernel is closed: the add
    # after that convolution cannot join it and reads the output back; it joins the second BatchNorm and ReLU.
    assert [kind for kind, _, _ in kernels] == ["tensor", "fused", "tensor", "fused"]
    assert kernels[3][2] == activation + params + activation + activation


def test_an_op_outside_the_compiled_model_is_not_fused() -> None:
    trace = FusionTrace()
    x = torch.empty(1024, device="meta")
    with _CountingMode(fusion=trace):
        y = (x * 2).relu()
        alive = trace.alive()
    del y
    kernels = fuse(trace, alive, graph_inputs=1, training=False).ops
    assert [(kind, moved) for kind, _, moved in kernels] == [("memory", 8192.0), ("memory", 8192.0)]


@pytest.mark.parametrize(
    ("convs", "graph_nodes", "training", "channels_last"),
    [
        ([Conv(256, 256, 3, 1, 1e9)], 100, False, True),  # default: 0.823 of its channels-first cost
        ([Conv(256, 8, 3, 32, 1e9), Conv(256, 256, 1, 1, 1e9)], 100, False, False),  # half its FLOPs grouped
        ([Conv(256, 8, 3, 32, 1e8), Conv(256, 256, 1, 1, 1e9)], 100, False, True),
        ([Conv(768, 3, 16, 1, 1e9)], 2000, False, False),  # a ViT's patch embedding among many ops
        ([], 100, False, False),
        ([Conv(256, 8, 3, 32, 1e8), Conv(256, 256, 1, 1, 1e9)], 100, True, False),  # training: any grouped one
        ([Conv(64, 256, 3, 1, 1e9)], 100, True, False),  # training: a convolution that narrows by 2x or more
        ([Conv(32, 32, 3, 1, 1e9)], 100, True, False),  # training: every convolution small
        ([Conv(256, 256, 3, 1, 1e9), Conv(32, 32, 3, 1, 1e9)], 100, True, True),
    ],
)
def test_inductors_layout_decision(convs: list[Conv], graph_nodes: int, training: bool, channels_last: bool) -> None:
    assert layout_optimized(convs, graph_nodes, training) is channels_last


def test_a_compiled_resnet_makes_fewer_passes_over_memory_and_no_layout_conversions() -> None:
    eager = count_workload(Workload(model="resnet18", mode="infer", batch_size=8))
    compiled = count_workload(Workload(model="resnet18", mode="infer", batch_size=8, compile=True))
    assert "layout" in eager.kinds and "layout" not in compiled.kinds
    assert compiled.kinds["tensor"] == eager.kinds["tensor"]  # the convolutions are cuDNN's either way
    eager_memory = sum(eager.kinds[kind].bytes for kind in ("memory", "norm", "strided") if kind in eager.kinds)
    assert compiled.kinds["fused"].bytes < 0.7 * eager_memory
    assert len(compiled.ops) < len(eager.ops)
    assert compiled.peak_live_bytes < eager.peak_live_bytes


def test_a_compiled_training_step_keeps_what_backward_reads_and_fuses_forward_and_backward_apart() -> None:
    eager = count_workload(Workload(model="resnet18", batch_size=8))
    compiled = count_workload(Workload(model="resnet18", batch_size=8, compile=True))
    eager_memory = sum(eager.kinds[kind].bytes for kind in ("memory", "norm", "strided") if kind in eager.kinds)
    assert 0.3 * eager_memory < compiled.kinds["fused"].bytes < eager_memory
    assert compiled.kinds["tensor"] == eager.kinds["tensor"]
