"""A request cannot buy much of the event loop or a large answer with a small body (a 6 KB body of 1000 ambiguous
target names): lists and strings are capped in the schema, catalog lookups are cheap, and a 422 stays small."""

from __future__ import annotations

import time

from .helpers import body


def test_a_thousand_ambiguous_targets_are_refused_by_the_list_cap_with_a_small_answer(client, keys, configure):
    started = time.perf_counter()
    answer = client.post("/v1/predictions", json=body(["rtx"] * 1000), headers=keys.a)
    elapsed = time.perf_counter() - started

    assert answer.status_code == 422
    assert len(answer.content) < 4096
    assert elapsed < 1.0


def test_the_most_ambiguous_targets_a_request_may_hold_cost_little_and_answer_small(client, keys, configure):
    started = time.perf_counter()
    answer = client.post("/v1/predictions", json=body(["rtx"] * 256), headers=keys.a)
    elapsed = time.perf_counter() - started

    assert answer.status_code == 422
    assert len(answer.content) < 32 * 1024  # was ~3 KB per name
    assert elapsed < 1.0


def test_looking_up_the_most_ambiguous_targets_a_request_may_hold_takes_milliseconds():
    from understudy.catalog import catalog
    from understudy.errors import UnknownTarget

    lookups = catalog()
    started = time.perf_counter()
    for _ in range(256):
        try:
            lookups.get("rtx")
        except UnknownTarget:
            pass

    assert time.perf_counter() - started < 0.08  # ~12 ms on a loaded 2-core machine; 1000 took 0.5 s before


def test_a_long_model_name_is_refused_by_its_length_before_any_lookup(client, keys, configure):
    answer = client.post("/v1/predictions", json=body(model="resnet" * 5000), headers=keys.a)

    assert answer.status_code == 422
    assert answer.json()["errors"][0]["field"] == "workload.model"
    assert len(answer.content) < 4096
