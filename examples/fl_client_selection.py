"""An FL orchestrator choosing how many clients to sample per round, and which, under a round-time deadline.

Synchronous federated averaging waits for the slowest client of each round. Before training starts, the orchestrator
asks Understudy how long one local training step takes on each kind of device in its fleet (none of which it owns),
weighted by how many of each there are, and how long a round takes on each: download the model, run the local
steps, upload the update (the round model, GET /v1/populations/{id}/rounds; links per device kind by default).
Then it plans the rounds:

  A. sampling K clients at random from the whole fleet: the largest K whose *expected* round time (the expected
     slowest of K) fits the deadline;
  B. the same, but the round must meet the deadline with a given probability: F(d)^K >= confidence, F(d) being the
     chance that one random client finishes by the deadline;
  C. leaving out the device kinds whose median device's round misses the deadline, at the price of the share of
     the fleet that never takes part (devices of one kind differ: a kind's slower devices may miss it still).

Run it against a service (`understudy serve` and a worker; README "Running the service"):

    UNDERSTUDY_URL=http://127.0.0.1:8000 UNDERSTUDY_API_KEY=us_... .venv/bin/python examples/fl_client_selection.py
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from client import Client, ClientError, Population, PopulationRounds

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
    expected_round_s: dict[int, float | None]
    k_expected: int | None  # A: largest candidate K whose expected round time fits
    k_confident: int  # B: largest K meeting the deadline with the given probability (-1: any K)
    confident_chance: dict[int, float]
    eligible_share: float  # C: share of the fleet that can meet the deadline at all
    left_out: list[tuple[str, float, float]]  # (device, share of the fleet, its round in s)


def plan_rounds(population: Population, rounds: PopulationRounds, confidence: float) -> Plan:
    """Choose K from the service's round model: expected round times and deadline chances per K."""
    deadline = rounds.deadline_s
    assert deadline is not None
    by_k = {r.k: r for r in rounds.rounds}
    expected = {k: r.expected_round_s for k, r in by_k.items() if k in CANDIDATE_K}
    fitting = [k for k, seconds in expected.items() if seconds is not None and seconds <= deadline]
    one = by_k[1].p_deadline or 0.0  # F(d): one random client finishes by the deadline
    if one >= 1.0:
        k_confident = -1
    elif one <= 0.0 or one < confidence:
        k_confident = 0
    else:
        k_confident = int(math.floor(math.log(confidence) / math.log(one) + 1e-12))
    excluded = population.summary.excluded if population.summary else []
    ran_share = 1.0 - sum(e.share for e in excluded)  # the round model's shares are of the devices that run it
    too_slow = [(kind.target_name or kind.target_id, kind.share * ran_share, kind.nominal_s)
                for kind in rounds.kinds if kind.nominal_s > deadline]
    return Plan(
        expected_round_s=expected,
        k_expected=max(fitting) if fitting else None,
        k_confident=k_confident,
        confident_chance={k: by_k[k].p_deadline or 0.0 for k in expected},
        eligible_share=ran_share - sum(share for _, share, _ in too_slow),
        left_out=sorted(too_slow, key=lambda item: -item[2]),
    )


def report(population: Population, rounds: PopulationRounds, plan: Plan, confidence: float) -> str:
    s = population.summary
    assert s is not None and rounds.deadline_s is not None
    lines = [f"{population.model}: one step's GPU time on the fleet (p50 {s.p50_ms:.1f} ms, p90 {s.p90_ms:.1f} ms, "
             f"p99 {s.p99_ms:.1f} ms); a round downloads {rounds.update_bytes / 1e6:.1f} MB, runs "
             f"{rounds.local_steps} steps and uploads the update; deadline {rounds.deadline_s:g} s", ""]
    lines.append("  device kind (its median device)      download  compute   upload    round (s)")
    for kind in sorted(rounds.kinds, key=lambda k: k.nominal_s):
        lines.append(f"  {(kind.target_name or kind.target_id)[:34]:<34}  {kind.download_s:>8.2f}  "
                     f"{kind.compute_s:>7.2f}  {kind.upload_s:>7.2f}  {kind.nominal_s:>9.2f}")
    lines += ["", "  K   expected round (s)   P(round <= deadline)"]
    for k, seconds in plan.expected_round_s.items():
        shown = f"{seconds:>16.2f}" if seconds is not None else f"{'never':>16}"
        lines.append(f"{k:>4}   {shown}   {plan.confident_chance[k]:>20.3f}")
    lines.append("")
    if plan.k_expected is None:
        lines.append("A. no candidate K has an expected round time within the deadline")
    else:
        lines.append(f"A. sample K = {plan.k_expected} clients per round: the expected round time fits the deadline")
    if plan.k_confident < 0:
        lines.append("B. every device kind meets the deadline: any K does, with certainty")
    elif plan.k_confident == 0:
        lines.append(f"B. no K meets the deadline with probability {confidence:g} when sampling from the whole fleet")
    else:
        lines.append(f"B. at most K = {plan.k_confident} clients per round meet the deadline with probability "
                     f">= {confidence:g}")
    if plan.left_out:
        names = ", ".join(f"{name} ({share:.0%}, {seconds:.1f} s)" for name, share, seconds in plan.left_out)
        lines.append(f"C. leave out {names}: the other kinds' median devices meet the deadline, and "
                     f"{plan.eligible_share:.0%} of the fleet takes part")
    else:
        lines.append("C. every device kind's median device meets the deadline: no kind needs to be left out")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="the service (default: UNDERSTUDY_URL, else http://127.0.0.1:8000)")
    parser.add_argument("--api-key", help="X-API-Key (default: UNDERSTUDY_API_KEY)")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--precision", default="fp32", help="FL clients train in fp32 (the populations' default)")
    parser.add_argument("--estimator", default=None, help="default: the service's choice")
    parser.add_argument("--local-steps", type=int, default=20, help="local training steps per round")
    parser.add_argument("--deadline-s", type=float, default=25.0, help="the round-time deadline")
    parser.add_argument("--confidence", type=float, default=0.9)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)

    workload = {"model": args.model, "mode": "train", "batch_size": args.batch_size,
                "resolution": args.resolution, "precision": args.precision, "optimizer": "sgd"}
    try:
        with Client(args.url, args.api_key) as client:
            population = client.population(workload, FLEET, k=CANDIDATE_K, estimator=args.estimator,
                                           timeout=args.timeout)
            if population.summary is None:
                sys.stderr.write(f"error: the population could not be predicted: {population.error}\n")
                return 1
            rounds = client.population_rounds(population.id, k=(1, *CANDIDATE_K), deadline_s=args.deadline_s,
                                              config={"local_steps": args.local_steps})
    except ClientError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    plan = plan_rounds(population, rounds, args.confidence)
    sys.stdout.write(report(population, rounds, plan, args.confidence) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
