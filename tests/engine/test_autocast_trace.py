"""The meta-device trace's stand-in for CUDA's autocast (engine.counting._Autocast): each op autocast lowers gets its
inputs cast, and a weight's lower-precision copy is made once per autocast region, as CUDA's autocast caches it."""

from __future__ import annotations

import torch

from engine.counting import _Autocast


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
