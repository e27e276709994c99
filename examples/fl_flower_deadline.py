"""A Flower federation on CPU whose clients take as long as Understudy says their GPUs would, and a strategy that
picks clients to meet a round deadline.

Flower has no time model: a simulated client finishes when its Python code does. Here every client is one device
of a fleet (catalog GPUs and two kinds the catalog lacks), and the round's clock is Understudy's:

1. Understudy predicts one training step of the model the federation trains (timm's `test_efficientnet`, 10
   classes, 32 px) on every device kind of the fleet (POST /v1/populations), and the round model turns it into each
   kind's round: download + local steps + upload (GET /v1/populations/{id}/rounds).
2. A seeded trace (GET /v1/populations/{id}/trace) makes each of the federation's clients a device of a kind, and gives
   its time, availability and dropout in every round.
3. The clients really train the model (torch on CPU, synthetic data) and report the simulated time the trace gives
   them. `DeadlineFedAvg` samples ceil(1.3 K) clients among those whose device's nominal round fits the
   deadline, keeps the first K that finish in time and drops the stragglers; plain `FedAvg` sampling at random is
   run beside it on the same clients.

The federation runs in this process through Flower's own server loop (`flwr.server.Server.fit`, its client manager,
FedAvg's aggregation), with each client behind an in-process ClientProxy: no Ray (what flwr's simulation engine
would start) and no gRPC, so it needs one CPU core and a few seconds.

    UNDERSTUDY_URL=http://127.0.0.1:8000 UNDERSTUDY_API_KEY=us_... .venv/bin/python examples/fl_flower_deadline.py

Without --deadline-s the deadline is 1.5 x the median of the clients' nominal rounds: the faster half of the fleet
meets it in most rounds, the slower half rarely.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import timm
import torch
from flwr.client import NumPyClient
from flwr.common import (DisconnectRes, EvaluateIns, EvaluateRes, FitIns, FitRes, GetParametersIns,
                         GetParametersRes, GetPropertiesIns, GetPropertiesRes, NDArrays, Parameters, ReconnectIns,
                         Scalar, ndarrays_to_parameters)
from flwr.common.logger import FLOWER_LOGGER
from flwr.server import Server
from flwr.server.client_manager import ClientManager, SimpleClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.criterion import Criterion
from flwr.server.strategy import FedAvg

from client import Client, ClientError

MODEL = "test_efficientnet"
CLASSES = 10
RESOLUTION = 32
BATCH = 16
# Without --deadline-s: 1.5 x the clients' median nominal round, which the faster half meets in most rounds.
DEFAULT_DEADLINE_X_MEDIAN = 1.5
FLEET: list[dict[str, Any]] = [
    {"target": "rtx-4060", "count": 200},
    {"target": "rtx-3060-12-gb", "count": 120},
    {"target": "gtx-1660-super", "count": 80},
    {"target": {"name": "Phone-class GPU (4 GB)", "architecture": "unknown", "sm_count": 4,
                "boost_clock_mhz": 900, "memory_bandwidth_gbps": 34, "memory_size_gb": 4}, "count": 150},
    {"target": {"name": "Jetson Orin Nano class (8 GB)", "architecture": "Ampere", "sm_count": 8,
                "boost_clock_mhz": 625, "memory_bandwidth_gbps": 68, "memory_size_gb": 8}, "count": 100},
]


# --- the clients: real training on CPU, simulated time from Understudy --------------------------------------------


def synthetic_data(seed: int, samples: int, skew: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Images whose class is a fixed colour pattern plus noise; `skew` weights the classes (non-IID clients)."""
    patterns = np.random.default_rng(0).normal(size=(CLASSES, 3, RESOLUTION, RESOLUTION)).astype(np.float32)
    rng = np.random.default_rng(seed)
    labels = rng.choice(CLASSES, size=samples, p=skew)
    images = patterns[labels] + rng.normal(scale=1.5, size=(samples, 3, RESOLUTION, RESOLUTION)).astype(np.float32)
    return torch.from_numpy(images), torch.from_numpy(labels)


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return timm.create_model(MODEL, pretrained=False, num_classes=CLASSES)


def get_weights(model: torch.nn.Module) -> NDArrays:
    return [value.detach().cpu().numpy().copy() for value in model.state_dict().values()]


def set_weights(model: torch.nn.Module, weights: NDArrays) -> None:
    keys = list(model.state_dict())
    model.load_state_dict({key: torch.from_numpy(np.asarray(w)) for key, w in zip(keys, weights, strict=True)})


@dataclass
class SimulatedDevice:
    """One client's device kind and, per round, the time the trace gives it and whether it finishes."""

    target_id: str
    expected_s: float
    round_s: list[float]
    finishes: list[bool]


class TraceClient(NumPyClient):
    """Trains the model on its own data for `local_steps` steps and reports its simulated round time."""

    def __init__(self, cid: int, device: SimulatedDevice, local_steps: int) -> None:
        skew = np.random.default_rng(1000 + cid).dirichlet(np.full(CLASSES, 0.5))
        self.images, self.labels = synthetic_data(cid + 1, BATCH * local_steps, skew)
        self.device = device
        self.local_steps = local_steps
        self.model = make_model()

    def fit(self, parameters: NDArrays, config: dict[str, Scalar]) -> tuple[NDArrays, int, dict[str, Scalar]]:
        set_weights(self.model, parameters)
        self.model.train()
        optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        for step in range(self.local_steps):
            batch = slice(step * BATCH, (step + 1) * BATCH)
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(self.model(self.images[batch]), self.labels[batch]).backward()
            optimizer.step()
        r = int(config["server_round"]) - 1
        return get_weights(self.model), len(self.labels), {
            "simulated_s": self.device.round_s[r], "finished": self.device.finishes[r]}


class InProcessClientProxy(ClientProxy):
    """A Flower client called in this process: what flwr's simulation engine does through Ray, without Ray."""

    def __init__(self, cid: str, client: NumPyClient) -> None:
        super().__init__(cid)
        self.client = client.to_client()

    def get_properties(self, ins: GetPropertiesIns, timeout: float | None,
                       group_id: int | None) -> GetPropertiesRes:
        return self.client.get_properties(ins)

    def get_parameters(self, ins: GetParametersIns, timeout: float | None,
                       group_id: int | None) -> GetParametersRes:
        return self.client.get_parameters(ins)

    def fit(self, ins: FitIns, timeout: float | None, group_id: int | None) -> FitRes:
        return self.client.fit(ins)

    def evaluate(self, ins: EvaluateIns, timeout: float | None, group_id: int | None) -> EvaluateRes:
        return self.client.evaluate(ins)

    def reconnect(self, ins: ReconnectIns, timeout: float | None, group_id: int | None) -> DisconnectRes:
        return DisconnectRes(reason="")


# --- the strategies -------------------------------------------------------------------------------------------


@dataclass
class RoundLog:
    server_round: int
    sampled: int
    on_time: int
    round_s: float
    met: bool
    accuracy: float = 0.0


@dataclass
class FitsTheDeadline(Criterion):
    expected_s: dict[str, float]
    deadline_s: float

    def select(self, client: ClientProxy) -> bool:
        return self.expected_s[client.cid] <= self.deadline_s


class TimedFedAvg(FedAvg):
    """FedAvg that keeps the first K updates to arrive within the deadline, on the simulated clock, and logs it."""

    def __init__(self, *, k: int, deadline_s: float, **kwargs: Any) -> None:
        super().__init__(on_fit_config_fn=lambda server_round: {"server_round": server_round},
                         fit_metrics_aggregation_fn=lambda metrics: {}, **kwargs)
        self.k = k
        self.deadline_s = deadline_s
        self.log: list[RoundLog] = []

    def aggregate_fit(self, server_round: int, results: list[tuple[ClientProxy, FitRes]],
                      failures: list[Any]) -> tuple[Parameters | None, dict[str, Scalar]]:
        finished = sorted((r for r in results if r[1].metrics["finished"]),
                          key=lambda r: float(r[1].metrics["simulated_s"]))
        on_time = [r for r in finished if float(r[1].metrics["simulated_s"]) <= self.deadline_s][:self.k]
        met = len(on_time) == self.k
        # The round closes at its K-th update, else the server waits out the deadline with what it has.
        round_s = float(on_time[-1][1].metrics["simulated_s"]) if met else self.deadline_s
        self.log.append(RoundLog(server_round, len(results), len(on_time), round_s, met))
        return super().aggregate_fit(server_round, on_time, failures)


class DeadlineFedAvg(TimedFedAvg):
    """Samples ceil(overcommit x K) clients among those whose device's nominal round fits the deadline."""

    def __init__(self, *, expected_s: dict[str, float], overcommit: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.criterion = FitsTheDeadline(expected_s, self.deadline_s)
        self.overcommit = overcommit

    def configure_fit(self, server_round: int, parameters: Parameters,
                      client_manager: ClientManager) -> list[tuple[ClientProxy, FitIns]]:
        eligible = sum(self.criterion.select(c) for c in client_manager.all().values())
        n = min(eligible, math.ceil(self.k * self.overcommit))
        clients = client_manager.sample(num_clients=n, min_num_clients=n, criterion=self.criterion)
        fit_ins = FitIns(parameters, {"server_round": server_round})
        return [(client, fit_ins) for client in clients]


# --- the run --------------------------------------------------------------------------------------------------


@dataclass
class Federation:
    devices: list[SimulatedDevice]
    deadline_s: float
    nominal_by_kind: dict[str, float] = field(default_factory=dict)


def plan(client: Client, args: argparse.Namespace) -> Federation:
    """Ask Understudy for the fleet's step times, the round model and a trace of the federation's clients."""
    workload = {"model": MODEL, "mode": "train", "batch_size": BATCH, "resolution": RESOLUTION,
                "num_classes": CLASSES, "precision": "fp32", "optimizer": "sgd"}
    population = client.population(workload, FLEET, k=[args.k], estimator=args.estimator, timeout=args.timeout)
    if population.status != "done":
        raise SystemExit(f"the fleet could not be predicted: {population.error}")
    config = {"local_steps": args.local_steps, "sigma": args.sigma, "availability": args.availability,
              "dropout": args.dropout}
    rounds = client.population_rounds(population.id, k=[args.k], config=config)
    trace = client.population_trace(population.id, format="json", clients=args.clients, rounds=args.rounds,
                                    seed=args.seed, config=config)
    data = json.loads(trace)
    nominal = {kind.target_id: kind.nominal_s for kind in rounds.kinds}
    # Each client is a device of its own: its nominal round, not its kind's median device's.
    devices = [SimulatedDevice(target_id=device["target_id"], expected_s=device["nominal_s"], round_s=[],
                               finishes=[]) for device in data["devices"]]
    for row in data["trace"]:
        devices[row["client_id"]].round_s.append(row["total_s"])
        devices[row["client_id"]].finishes.append(row["available"] and not row["dropped"])
    median = float(np.median([d.expected_s for d in devices]))
    deadline = args.deadline_s if args.deadline_s is not None else DEFAULT_DEADLINE_X_MEDIAN * median
    names = {kind.target_id: kind.target_name or kind.target_id for kind in rounds.kinds}
    return Federation(devices, deadline, {names[t]: s for t, s in nominal.items()})


def run(strategy: TimedFedAvg, federation: Federation, local_steps: int, rounds: int) -> list[RoundLog]:
    test_images, test_labels = synthetic_data(seed=0, samples=256, skew=np.full(CLASSES, 1 / CLASSES))

    def accuracy(server_round: int, weights: NDArrays, config: dict[str, Scalar]) -> tuple[float, dict[str, Scalar]]:
        model = make_model()
        set_weights(model, weights)
        model.eval()
        with torch.no_grad():
            logits = model(test_images)
        loss = float(torch.nn.functional.cross_entropy(logits, test_labels))
        return loss, {"accuracy": float((logits.argmax(1) == test_labels).float().mean())}

    strategy.evaluate_fn = accuracy
    manager = SimpleClientManager()
    for cid, device in enumerate(federation.devices):
        manager.register(InProcessClientProxy(str(cid), TraceClient(cid, device, local_steps)))
    server = Server(client_manager=manager, strategy=strategy)
    server.set_max_workers(1)  # one core, and the same order of work every run
    history, _ = server.fit(num_rounds=rounds, timeout=None)
    for entry, (_, metrics) in zip(strategy.log, history.metrics_centralized["accuracy"][1:], strict=True):
        entry.accuracy = float(metrics)
    return strategy.log


def report(federation: Federation, logs: dict[str, list[RoundLog]], k: int) -> str:
    lines = [f"{MODEL} (train, batch {BATCH}, {RESOLUTION} px): each device kind's round from Understudy "
             "(download + local steps + upload):"]
    lines += [f"  {name:<32} {seconds:8.3f} s" for name, seconds in sorted(federation.nominal_by_kind.items(),
                                                                          key=lambda item: item[1])]
    fits = sum(d.expected_s <= federation.deadline_s for d in federation.devices)
    lines += [f"deadline {federation.deadline_s:.3f} s: {fits} of {len(federation.devices)} clients' devices fit it; "
              f"K = {k} updates per round", "",
              "round  strategy          sampled  on time  round (s)  met   accuracy"]
    for name, log in logs.items():
        for entry in log:
            lines.append(f"{entry.server_round:>5}  {name:<16}  {entry.sampled:>7}  {entry.on_time:>7}  "
                         f"{entry.round_s:>9.3f}  {'yes' if entry.met else 'no':<4}  {entry.accuracy:8.3f}")
    lines.append("")
    for name, log in logs.items():
        lines.append(f"{name}: {sum(e.met for e in log)} of {len(log)} rounds got K updates by the deadline, "
                     f"{sum(e.round_s for e in log):.3f} s of simulated time, final accuracy {log[-1].accuracy:.3f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="the service (default: UNDERSTUDY_URL, else http://127.0.0.1:8000)")
    parser.add_argument("--api-key", help="X-API-Key (default: UNDERSTUDY_API_KEY)")
    parser.add_argument("--estimator", default=None, help="default: the service's choice")
    parser.add_argument("--clients", type=int, default=20, help="clients in the federation")
    parser.add_argument("--k", type=int, default=4, help="updates per round")
    parser.add_argument("--overcommit", type=float, default=1.3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--local-steps", type=int, default=5)
    parser.add_argument("--deadline-s", type=float, default=None, help="default: 1.5 x the clients' median round")
    parser.add_argument("--sigma", type=float, default=0.3, help="round-to-round variability (lognormal sigma)")
    parser.add_argument("--availability", type=float, default=0.95)
    parser.add_argument("--dropout", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)

    FLOWER_LOGGER.setLevel(logging.WARNING)
    torch.set_num_threads(1)
    try:
        with Client(args.url, args.api_key) as client:
            federation = plan(client, args)
    except ClientError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    expected = {str(cid): device.expected_s for cid, device in enumerate(federation.devices)}
    initial = ndarrays_to_parameters(get_weights(make_model()))
    logs = {}
    for name, strategy in (
        ("deadline-aware", DeadlineFedAvg(k=args.k, deadline_s=federation.deadline_s, expected_s=expected,
                                          overcommit=args.overcommit, fraction_evaluate=0.0,
                                          initial_parameters=initial)),
        ("random", TimedFedAvg(k=args.k, deadline_s=federation.deadline_s,
                               fraction_fit=math.ceil(args.k * args.overcommit) / args.clients,
                               min_fit_clients=1, fraction_evaluate=0.0, initial_parameters=initial)),
    ):
        random.seed(args.seed)  # Flower's client manager samples with the random module
        logs[name] = run(strategy, federation, args.local_steps, args.rounds)
    sys.stdout.write(report(federation, logs, args.k) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
