"""Each trace format read and timed by its framework's own code, installed from PyPI (the test extra and
scripts/install.sh): FedScale's aggregator and client manager, Oort's training selector as FedScale ships it, FLGo's
server and clock, APPFL's virtual-time driver. One round or more on a trace with availability and dropout on, and
the framework's round time equals the trace's to 1 %.

FedScale's Aggregator module imports TensorFlow and wandb at the top; its round logic (client registration,
participant selection and `tictak_client_tasks`) uses neither, so those methods are compiled from the installed
aggregator.py and run on a bare object. APPFL's driver gets stand-ins for its server and client agents, which would
train a model: the driver takes a client's time from its ClientProfile, not from training."""

from __future__ import annotations

import ast
import importlib.util
import json
import logging
import pickle
import sys
import types
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest

from understudy.rounds import DeviceStep, RoundConfig, RoundModel
from understudy.traces import Trace, render, sample_trace
from tests.scripts import load_script

FLEET = [DeviceStep("rtx-3090", 50.0, 120, "consumer", kernels=300),
         DeviceStep("t4", 120.0, 300, "datacenter", kernels=300),
         DeviceStep("inline-0123456789ab", 400.0, 80, "edge")]
CONFIG = RoundConfig(local_steps=20, sigma=0.2, availability=0.8, dropout=0.1)
BATCH = 32
UPDATE_BYTES = 11_700_000 * 4


def round_model(overcommit: float = 1.0) -> RoundModel:
    return RoundModel(FLEET, batch_size=BATCH, param_count=UPDATE_BYTES // 4,
                      config=CONFIG.model_copy(update={"overcommit": overcommit}))


def write(trace: Trace, fmt: str, path: Path) -> Path:
    path.write_bytes(render(trace, fmt).body)
    return path


# --- FedScale -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fedscale() -> types.SimpleNamespace:
    pytest.importorskip("fedscale.cloud.client_manager", reason="pip install fedscale (the test extra)")
    argv = sys.argv
    sys.argv = ["fedscale"]  # FedScale's config parser reads the command line as it is imported
    try:
        from fedscale.cloud import commons
        from fedscale.cloud.client_manager import ClientManager
        from fedscale.cloud.config_parser import parser
    finally:
        sys.argv = argv
    restore_builtins_in_oort()
    spec = importlib.util.find_spec("fedscale.cloud.aggregation.aggregator")
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    aggregator = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Aggregator")
    wanted = {"load_client_profile", "client_register_handler", "select_participants", "tictak_client_tasks"}
    methods: list[ast.stmt] = [node for node in aggregator.body
                               if isinstance(node, ast.FunctionDef) and node.name in wanted]
    assert {node.name for node in methods if isinstance(node, ast.FunctionDef)} == wanted
    rounds_class = ast.ClassDef(name="AggregatorRounds", bases=[], keywords=[], body=methods, decorator_list=[])
    namespace: dict[str, Any] = {"commons": commons, "logging": logging, "os": __import__("os"), "pickle": pickle}
    exec(compile(ast.fix_missing_locations(ast.Module(body=[rounds_class], type_ignores=[])), spec.origin, "exec"),
         namespace)
    return types.SimpleNamespace(Rounds=namespace["AggregatorRounds"], ClientManager=ClientManager,
                                 commons=commons, defaults=parser.parse_args([]))


def restore_builtins_in_oort() -> None:
    """Oort's utils/lp.py star-imports numpy, and oort.py star-imports lp: numpy 2 exports min, max, sum, abs, round,
    any, all and pow, so Oort's own `min(a, b)` calls numpy.min(a, axis=b) and every selection fails. NumPy 1.x
    exported none of them, which is what Oort was written against; this puts Python's back."""
    import builtins

    import thirdparty.oort.oort as oort

    for name in ("min", "max", "sum", "abs", "round", "any", "all", "pow"):
        setattr(oort, name, getattr(builtins, name))


def fedscale_aggregator(fedscale: types.SimpleNamespace, profiles: Path, avail: Path, *, mode: str,
                        clients: int, participants: int, overcommitment: float) -> Any:
    """FedScale's simulation aggregator, its executors registered with `clients` clients of 1000 samples each."""
    args = Namespace(**{**vars(fedscale.defaults), "sample_mode": mode, "device_conf_file": str(profiles),
                        "device_avail_file": str(avail), "num_participants": participants,
                        "overcommitment": overcommitment, "batch_size": BATCH, "local_steps": CONFIG.local_steps,
                        "filter_less": 0, "filter_more": 10**9})
    aggregator = fedscale.Rounds()
    aggregator.args, aggregator.experiment_mode = args, fedscale.commons.SIMULATION_MODE
    aggregator.client_manager = fedscale.ClientManager(mode, args)
    aggregator.client_profiles = aggregator.load_client_profile(str(profiles))
    aggregator.num_of_clients, aggregator.client_conf, aggregator.global_virtual_clock = 0, {}, 0.0
    aggregator.model_update_size = UPDATE_BYTES / 1024 * 8  # kbits, as Aggregator.run computes it
    aggregator.client_register_handler(1, {"size": [1000] * clients})
    return aggregator


def test_fedscale_runs_the_traces_rounds_with_its_availability_and_dropout(fedscale, tmp_path):
    # 24 clients, the first 12 finishers close a round; over-commitment 2 samples all of them, as FedScale will.
    trace = sample_trace(round_model(overcommit=2.0), clients=24, rounds=4, seed=11, k=12)
    aggregator = fedscale_aggregator(fedscale, write(trace, "fedscale", tmp_path / "conf.pkl"),
                                     write(trace, "fedscale_avail", tmp_path / "avail.pkl"), mode="random",
                                     clients=24, participants=12, overcommitment=2.0)

    durations = []
    for _ in range(trace.rounds):
        sampled = aggregator.select_participants(12, overcommitment=2.0)
        *_, duration, _ = aggregator.tictak_client_tasks(sampled, 12)
        durations.append(duration)
        aggregator.global_virtual_clock += duration

    assert trace.dropped.any() and not trace.available.all()
    assert durations == pytest.approx(trace.round_times(nominal=True).tolist(), rel=0.01)


def test_fedscale_availability_exports_follow_availability_and_dropout():
    def avail(availability: float, dropout: float) -> bytes:
        config = CONFIG.model_copy(update={"availability": availability, "dropout": dropout})
        model = RoundModel(FLEET, batch_size=BATCH, param_count=UPDATE_BYTES // 4, config=config)
        return render(sample_trace(model, clients=20, rounds=3, seed=1), "fedscale_avail").body

    assert len({avail(1.0, 0.0), avail(0.7, 0.0), avail(1.0, 0.3)}) == 3


# --- Oort ---------------------------------------------------------------------------------------------------------


def test_oorts_selector_as_fedscale_ships_it_replays_the_feedbacks_and_selects_a_timed_round(fedscale, tmp_path):
    # Every client takes part in the trace's rounds, so a round of any 10 of them closes within the trace's.
    trace = sample_trace(round_model(), clients=40, rounds=2, seed=12)
    feedbacks = json.loads(render(trace, "oort").body)
    aggregator = fedscale_aggregator(fedscale, write(trace, "fedscale", tmp_path / "conf.pkl"),
                                     write(trace, "fedscale_avail", tmp_path / "avail.pkl"), mode="oort",
                                     clients=40, participants=8, overcommitment=1.3)
    manager = aggregator.client_manager
    manager.count = 1  # FedScale samples its first round at random; the trace's first round stands in for it
    # FedScale's client ids run 1..N and its client i is the trace's client i mod N.
    reported = {feedback["client_id"] or 40 for feedback in feedbacks["rounds"][0]}
    for feedback in feedbacks["rounds"][0]:
        manager.register_feedback(feedback["client_id"] or 40, feedback["reward"],
                                  time_stamp=feedback["time_stamp"], duration=feedback["duration"])
    aggregator.global_virtual_clock = float(trace.round_times(nominal=True)[0])

    sampled = aggregator.select_participants(8, overcommitment=1.3)
    clients_to_run, _, _, duration, _ = aggregator.tictak_client_tasks(sampled, 8)

    assert set(manager.ucb_sampler.unexplored) == set(range(1, 41)) - reported
    assert len(set(sampled)) == 10 and {int(c) for c in sampled} <= set(range(1, 41))
    online = trace.available[1] & ~trace.dropped[1]
    nominal = trace.nominal("nominal_s")
    expected = sorted(nominal[c % 40] for c in sampled if online[c % 40])[min(8, len(clients_to_run)) - 1]
    assert duration == pytest.approx(expected, rel=0.01)


# --- FLGo ---------------------------------------------------------------------------------------------------------


def test_flgos_server_and_clock_take_the_traces_round_times(tmp_path, monkeypatch):
    flgo = pytest.importorskip("flgo", reason="pip install flgo (the test extra)")
    import flgo.algorithm.fedavg as fedavg
    import flgo.benchmark.synthetic_regression as synthetic

    # 9 of 12 clients take part in a round, which closes at its 6th finisher.
    trace = sample_trace(round_model(overcommit=1.5), clients=12, rounds=3, seed=13, k=6)
    path = write(trace, "flgo", tmp_path / "trace.flgo.json")
    example = load_script("examples/flgo_trace_simulator.py")

    round_ms: list[int] = []

    class Server(fedavg.Server):
        def iterate(self) -> Any:
            start = self.gv.clock.current_time
            updated = super().iterate()
            round_ms.append(self.gv.clock.current_time - start)
            return updated

    algorithm = types.ModuleType("trace_fedavg")
    algorithm.Server, algorithm.Client = Server, fedavg.Client
    monkeypatch.chdir(tmp_path)
    task = str(tmp_path / "task")
    flgo.gen_task({"benchmark": {"name": synthetic, "para": {"num_clients": 12, "mean_datavol": 20}}}, task)
    runner = flgo.init(task, algorithm, option={"num_rounds": 3, "gpu": [], "sample": "full", "num_steps": 1,
                                                "no_log_console": True, "no_tqdm": True, "eval_interval": -1},
                       Simulator=example.trace_simulator(path))
    runner.run()

    assert trace.dropped[trace.participants].any() and not trace.available[trace.participants].all()
    expected_ms = trace.round_times() * 1000
    assert round_ms == pytest.approx(expected_ms.tolist(), rel=0.01)
    assert max(round_ms) < 999_999  # FLGo's default tolerance is never waited out


# --- APPFL --------------------------------------------------------------------------------------------------------


class _Update:
    """A model update of a given size, as APPFL's driver measures one (numel x element_size)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def numel(self) -> int:
        return self.size

    def element_size(self) -> int:
        return 1


class _Scheduler:
    num_clients = 0

    def set_num_clients(self, count: int) -> None:
        self.num_clients = count


class _Server:
    """Stands in for APPFL's ServerAgent: holds an update of the trace's size and aggregates nothing."""

    def __init__(self, model_bytes: float) -> None:
        self.scheduler, self.update = _Scheduler(), _Update(round(model_bytes))

    def get_parameters(self, serial_run: bool = True) -> dict[str, _Update]:
        return {"update": self.update}

    def global_update(self, client_id: str, local_model: Any, blocking: bool, **meta: Any) -> None:
        return None

    def training_finished(self) -> bool:
        return False


class _Client:
    """Stands in for APPFL's ClientAgent: reports the local steps it ran, as VanillaTrainer does."""

    def __init__(self, client_id: str, steps: int) -> None:
        self.client_id, self.steps = client_id, steps

    def get_id(self) -> str:
        return self.client_id

    def load_parameters(self, parameters: Any) -> None:
        return None

    def train(self) -> None:
        return None

    def get_parameters(self) -> tuple[dict[str, Any], dict[str, int]]:
        return {}, {"current_local_steps": self.steps}


def test_appfls_driver_reads_the_profiles_and_times_each_round():
    vsim = pytest.importorskip("appfl.vsim", reason="scripts/install.sh installs appfl (without its pins)")
    trace = sample_trace(round_model(overcommit=1.5), clients=30, rounds=3, seed=14, k=10)
    data = json.loads(render(trace, "appfl").body)
    for entry in data["profiles"].values():
        vsim.ClientProfile(**entry)

    durations = []
    for this_round in data["rounds"]:
        profiles = {cid: vsim.ClientProfile(**entry) for cid, entry in this_round["profiles"].items()}
        driver = vsim.SyncSimDriver(
            _Server(data["model_bytes"]), [_Client(cid, data["num_local_steps"]) for cid in profiles], profiles,
            participants_per_round=len(profiles), logger=logging.getLogger("appfl-vsim"),
            base_step_time=data["base_step_time"], min_responses=this_round["min_responses"], target_rounds=1)
        driver.run()
        durations.append(driver.history[0]["duration"])

    assert trace.dropped[trace.participants].any() and not trace.available.all()
    assert durations == pytest.approx(trace.round_times().tolist(), rel=0.01)
