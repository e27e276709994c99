"""engine.probe's remembered host: `understudy predict` keys its cache with the last probe, so it must hold exactly
while the GPU, the driver and the software it describes are unchanged."""

from __future__ import annotations

from pathlib import Path

from tests.fakes import FakeNvml, h200_host

from engine.probe import remember_host, remembered_host


def test_a_remembered_host_is_returned_while_nothing_changed(tmp_path: Path) -> None:
    path = tmp_path / "gpu0.json"
    remember_host(path, 0, FakeNvml(), h200_host())
    assert remembered_host(path, 0, FakeNvml()) == h200_host()


def test_another_driver_forgets_the_host(tmp_path: Path) -> None:
    path = tmp_path / "gpu0.json"
    remember_host(path, 0, FakeNvml(driver="580.00"), h200_host())
    assert remembered_host(path, 0, FakeNvml(driver="590.10")) is None


def test_another_gpu_in_the_same_slot_forgets_the_host(tmp_path: Path) -> None:
    path = tmp_path / "gpu0.json"
    remember_host(path, 0, FakeNvml(uuid="GPU-aaaa"), h200_host())
    assert remembered_host(path, 0, FakeNvml(uuid="GPU-bbbb")) is None


def test_a_host_probed_with_a_gpu_is_not_the_answer_without_one(tmp_path: Path) -> None:
    path = tmp_path / "gpu0.json"
    remember_host(path, 0, FakeNvml(), h200_host())
    assert remembered_host(path, 0, None) is None


def test_a_missing_or_unreadable_file_is_no_host(tmp_path: Path) -> None:
    assert remembered_host(tmp_path / "none.json", 0, None) is None
    (tmp_path / "bad.json").write_text("{not json")
    assert remembered_host(tmp_path / "bad.json", 0, None) is None
