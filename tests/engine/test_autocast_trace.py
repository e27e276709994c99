"""The meta-device trace's stand-in for CUDA's autocast (engine.counting._Autocast): each op autocast lowers gets its
inputs cast, and a weight's lower-precision copy is made once per autocast region, as CUDA's autocast caches it; an
fp16 softmax or a reduction of a 16-bit tensor is one kernel that reads it and writes fp32, and a scan of one (cumsum)
a cast and then the scan, as CUDA runs them."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.counting import _Autocast, _CountingMode


def test_a_weights_cast_is_made_once_per_region() -> None:
    weight = torch.empty(4, 3, device="meta", requires_grad=True)
    with _Autocast(torch.bfloat16) as autocast:
        first = torch.matmul(torch.empty(2, 4, device="meta"), weight)
        second = torch.matmul(torch.empty(2, 4, device="meta"), weight)
        (source, _), = autocast.cache.values()  # one cast, used twice
        assert source is weight
    assert first.dtype == second.dtype == torch.bfloat16
    assert not autocast.cache  # the region's casts are dropped when it ends


def test_a_freed_weight_view_never_hands_its_cast_to_the_next_tensor() -> None:
    # Under no_grad a weight's view (a transpose, as relative-position attention takes of its tables) is a leaf that
    # requires grad, so autocast caches its cast; the view is freed after its op, and Python gives the next view
    # made there the same id. Each op must still see its own input's shape.
    tables = [torch.empty(width, 4, device="meta", requires_grad=True) for width in (3, 5, 7)]
    with torch.no_grad(), _Autocast(torch.bfloat16):
        for table in tables * 2:
            out = torch.matmul(torch.empty(2, 4, device="meta"), table.transpose(0, 1))
            assert out.shape == (2, table.shape[0])


def _traced(step, dtype: torch.dtype = torch.float16) -> list[tuple[str, float, float]]:  # type: ignore[no-untyped-def]
    mode = _CountingMode()
    with _Autocast(dtype), mode:
        step()
    return mode.ops


def test_an_fp16_softmax_is_one_kernel_that_writes_fp32() -> None:
    scores = torch.empty(8, 4, 64, 64, dtype=torch.float16, device="meta")
    elements = scores.numel()
    out: list[torch.Tensor] = []
    ops = _traced(lambda: out.append(scores.softmax(dim=-1)))
    assert out[0].dtype == torch.float32
    assert ops == [("memory", 0.0, elements * 2 + elements * 4)]  # no cast: 16-bit read, fp32 written


def test_a_bf16_softmax_is_cast_first_as_a_gpu_runs_it() -> None:
    scores = torch.empty(8, 4, 64, 64, dtype=torch.bfloat16, device="meta")
    elements = scores.numel()
    out: list[torch.Tensor] = []
    ops = _traced(lambda: out.append(scores.softmax(dim=-1)), torch.bfloat16)
    assert out[0].dtype == torch.float32
    assert ops == [("memory", 0.0, elements * (2 + 4)), ("memory", 0.0, elements * (4 + 4))]


def test_a_norm_of_a_16_bit_tensor_reads_it_once() -> None:
    x = torch.empty(8, 14, 14, 96, dtype=torch.float16, device="meta")
    out: list[torch.Tensor] = []
    ops = _traced(lambda: out.append(x.norm(p=2, dim=(1, 2), keepdim=True)))
    assert out[0].dtype == torch.float32
    assert ops == [("memory", 0.0, x.numel() * 2 + 8 * 96 * 4)]


def test_normalize_divides_a_16_bit_tensor_by_its_fp32_norm_without_casting_it() -> None:
    x = torch.empty(8, 96, 196, dtype=torch.float16, device="meta")
    out: list[torch.Tensor] = []
    ops = _traced(lambda: out.append(F.normalize(x, dim=-1)))
    assert out[0].dtype == torch.float32
    norm, clamp, divide = ops  # no cast kernel before them
    assert norm == ("memory", 0.0, x.numel() * 2 + 8 * 96 * 4)
    assert clamp == ("memory", 0.0, 2 * 8 * 96 * 4)
    assert divide[0] == "memory"


def test_a_cumsum_of_a_16_bit_tensor_is_cast_first_as_its_cuda_scan_runs_it() -> None:
    x = torch.empty(8, 4096, dtype=torch.float16, device="meta")
    out: list[torch.Tensor] = []
    ops = _traced(lambda: out.append(x.cumsum(dim=-1)))
    assert out[0].dtype == torch.float32
    assert ops == [("memory", 0.0, x.numel() * (2 + 4)), ("memory", 0.0, x.numel() * (4 + 4))]
