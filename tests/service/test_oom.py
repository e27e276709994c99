"""A workload too big for a target comes back as `oom` through the service, from the predicted peak memory: no GPU
is needed to say so."""

from __future__ import annotations

from .helpers import predict_body, run_queued_jobs


def test_vit_large_training_at_batch_256_is_oom_on_a_12_gb_card_and_fits_an_80_gb_one(client, auth, redis):
    body = predict_body(["rtx-3060-12-gb", "h100-sxm5-80-gb"], model="vit_large_patch16_224", mode="train",
                        batch_size=256, resolution=224, precision="amp-fp16")
    created = client.post("/v1/predictions", json=body, headers=auth)
    assert created.status_code == 202, created.text

    run_queued_jobs(redis)

    small, big = (client.get(f"/v1/predictions/{item['id']}").json() for item in created.json()["data"])
    assert small["status"] == "oom"
    assert "needs about" in small["error"] and "has 12 GB" in small["error"]
    assert big["status"] == "done"


def test_the_oom_answer_says_how_much_the_workload_needs_at_least_and_has_no_interval(client, auth, redis):
    body = predict_body(["rtx-3060-12-gb"], model="vit_large_patch16_224", mode="train", batch_size=256,
                        resolution=224, precision="amp-fp16")
    created = client.post("/v1/predictions", json=body, headers=auth)
    run_queued_jobs(redis)

    answer = client.get(f"/v1/predictions/{created.json()['data'][0]['id']}").json()

    memory = answer["memory"]
    assert (answer["status"], memory["verdict"], memory["capacity_gb"]) == ("oom", "oom", 12.0)
    assert 12.0 < memory["low_gb"] <= memory["peak_gb"]
    assert memory["summary"] == f"oom >= {memory['low_gb']:.1f} GB"
    assert (answer["latency"], answer["interval_ms"], answer["band"]) == (None, None, None)
