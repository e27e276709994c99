"""An FL orchestrator choosing how many clients to sample per round, and which, under a round-time deadline.

Synchronous federated averaging waits for the slowest client of each round. Before training starts, the orchestrator
asks Understudy how long one local training step takes on each kind of device in its fleet (none of which it owns),
weighted by how many of each there are, and plans the rounds:

  A. sampling K clients at random from the whole fleet: the largest K whose *expected* round time (the expected
     slowest of K, computed by the service) fits the deadline;
  B. the same, but the round must meet the deadline with a given probability: F(d)^K >= confidence;
  C. leaving out the device kinds that can never meet the deadline: then any K fits, at the price of the share of
     the fleet that never takes part.

Run it against a service (`understudy serve` and a worker; README "Running the service"):

    UNDERSTUDY_URL=http://127.0.0.1:8000 UNDERSTUDY_API_KEY=us_... \\
        .venv/bin/python examples/fl_client_selection.py --deadline-s 30 --local-steps 20
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from client import Client, ClientError, Population
from understudy.populations import DeviceLatency, max_clients_within, prob_round_within

# The fleet: catalog GPUs by id, and two kinds the catalog does not have, given inline by their specifications.
FLEET: list[dict] = [
    {"target": "rtx-4060", "count": 200},
    {"target": "rtx-3060-12-gb", "count": 120},
    {"target": "rtx-2060", "count": 150},
    {"target": "gtx-1660-super", "count": 80},
    {"target": "t4", "count": 60},
    {"target": {"name": "Laptop RTX 3050 (4 GB)", "architecture": "Ampere", "sm_count": 16,
                "boost_clock_mhz": 1500, "memory_bandwidth_gbps": 192, "memory_size_gb": 4}, "count": 150},
    {"target": {"name": "Jetson Orin Nano class (8 GB)", "architecture": "Ampere", "sm_count": 8,
                "boost_clock_mhz": 625, "memory_bandwidth_gbps": 68, "memory_size_gb": 8}, "count": 100},
]
CANDIDATE_K = (5, 10, 20, 50, 100)


@dataclass
class Plan:
    expected_round_s: dict[int, float]
    k_expected: int | None  # A: largest candidate K whose expected round time fits
    k_confident: int  # B: largest K meeting the deadline with the given probability
    confident_chance: dict[int, float]
    eligible_share: float  # C: share of the fleet that can meet the deadline at all
    left_out: list[tuple[str, float, float]]  # (device, share, round time in s)


def plan_rounds(population: Population, local_steps: int, deadline_s: float, confidence: float) -> Plan:
    """Turn the service's per-step latencies into round times (local_steps steps each) and choose K."""
    if population.summary is None:
        raise SystemExit(f"the population could not be predicted: {population.error}")
    step_deadline_ms = deadline_s * 1000 / local_steps  # a round meets the deadline iff each step fits this
    ran = [DeviceLatency(d.target_name or d.target_id, d.latency_ms, d.weight) for d in population.devices
           if d.status.value == "done" and d.latency_ms is not None]
    expected = {r.k: r.expected_max_ms * local_steps / 1000 for r in population.summary.round_time}
    fitting = [k for k, seconds in expected.items() if seconds <= deadline_s]
    chance = {k: prob_round_within(ran, k, step_deadline_ms) for k in expected}
    total = sum(d.weight for d in population.devices)
    too_slow = [(d.target_name or d.target_id, d.weight / total, d.latency_ms * local_steps / 1000)
                for d in population.devices if d.latency_ms is not None and d.latency_ms > step_deadline_ms]
    excluded = sum(e.share for e in population.summary.excluded)  # devices the workload does not fit at all
    return Plan(
        expected_round_s=expected,
        k_expected=max(fitting) if fitting else None,
        k_confident=max_clients_within(ran, step_deadline_ms, confidence, cap=max(CANDIDATE_K) * 100),
        confident_chance=chance,
        eligible_share=1.0 - excluded - sum(share for _, share, _ in too_slow),
        left_out=sorted(too_slow, key=lambda item: -item[2]),
    )


def report(population: Population, plan: Plan, local_steps: int, deadline_s: float, confidence: float) -> str:
    s = population.summary
    assert s is not None
    lines = [f"{population.model}: one local step on the fleet (p50 {s.p50_ms:.1f} ms, p90 {s.p90_ms:.1f} ms, "
             f"p99 {s.p99_ms:.1f} ms); a round is {local_steps} steps, deadline {deadline_s:g} s", ""]
    lines.append("  K   expected round (s)   P(round <= deadline)")
    for k, seconds in plan.expected_round_s.items():
        lines.append(f"{k:>4}   {seconds:>16.2f}   {plan.confident_chance[k]:>20.3f}")
    lines.append("")
    if plan.k_expected is None:
        lines.append("A. no candidate K has an expected round time within the deadline")
    else:
        lines.append(f"A. sample K = {plan.k_expected} clients per round: the expected round time fits the deadline")
    if plan.k_confident >= max(CANDIDATE_K) * 100:
        lines.append("B. every device kind meets the deadline: any K does, with certainty")
    elif plan.k_confident == 0:
        lines.append(f"B. no K meets the deadline with probability {confidence:g} when sampling from the whole fleet")
    else:
        lines.append(f"B. at most K = {plan.k_confident} clients per round meet the deadline with probability "
                     f">= {confidence:g}")
    if plan.left_out:
        names = ", ".join(f"{name} ({share:.0%}, {seconds:.1f} s)" for name, share, seconds in plan.left_out)
        lines.append(f"C. leave out {names}: any K then meets the deadline, and {plan.eligible_share:.0%} of the "
                     "fleet takes part")
    else:
        lines.append("C. every device kind meets the deadline on its own: nobody needs to be left out")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="the service (default: UNDERSTUDY_URL, else http://127.0.0.1:8000)")
    parser.add_argument("--api-key", help="X-API-Key (default: UNDERSTUDY_API_KEY)")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--precision", default="amp-fp16")
    parser.add_argument("--estimator", default=None, help="default: the service's choice")
    parser.add_argument("--local-steps", type=int, default=20, help="local training steps per round")
    parser.add_argument("--deadline-s", type=float, default=30.0, help="the round-time deadline")
    parser.add_argument("--confidence", type=float, default=0.9)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)

    workload = {"model": args.model, "mode": "train", "batch_size": args.batch_size,
                "resolution": args.resolution, "precision": args.precision, "optimizer": "sgd"}
    try:
        with Client(args.url, args.api_key) as client:
            population = client.population(workload, FLEET, k=CANDIDATE_K, estimator=args.estimator,
                                           timeout=args.timeout)
    except ClientError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    plan = plan_rounds(population, args.local_steps, args.deadline_s, args.confidence)
    sys.stdout.write(report(population, plan, args.local_steps, args.deadline_s, args.confidence) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
