"""A restarted daemon resumes from the memory the last run saved: its cooldown holds across the restart."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from daemonkit import FakeActuator, drive
from policykit import aggregated

from infctl.autoscaler.daemon import AutoscalerConfig
from infctl.autoscaler.memory import record
from infctl.autoscaler.memory_store import ConfigMapStore, FileStore
from infctl.autoscaler.profile import Layout
from infctl.autoscaler.setup import Options, build
from infctl.autoscaler.snapshot import ScalerState
from infctl.config import load_deployment

PROFILES = Path(__file__).parents[3] / "profiles"
GOLDEN = Path(__file__).parents[2] / "golden" / "kimi-k2-pool" / "07-configmap-kimi-k2-autoscaler.yaml"


def config(store: FileStore | None) -> AutoscalerConfig:
    return AutoscalerConfig(policy=aggregated(hi=8, up_cooldown_s=60), interval_s=0, port=None, memory=store)


async def restarted(store: FileStore | None, gap_s: float) -> list[tuple[str, int]]:
    """One run scales 2 -> 5 at its first decision (2 x 20 waiting); a second run on a fresh clock, with the
    load unchanged, decides ``gap_s`` and ``gap_s + 15`` wall seconds after that: its scale calls."""
    first = FakeActuator(2)
    await drive(config(store), first, waiting=20, ticks=1, wall0=1000.0)  # decides at wall 1015
    assert first.calls == [("both", 5)]
    second = FakeActuator(5)
    await drive(config(store), second, waiting=20, ticks=2, wall0=1000.0 + gap_s)
    return second.calls


async def test_the_cooldown_holds_across_a_restart(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "memory.json")
    # 20 s and 35 s after the scale-up: both inside the 60 s cooldown.
    assert await restarted(store, gap_s=20.0) == []
    saved = json.loads((tmp_path / "memory.json").read_text())
    assert saved["version"] == 1 and saved["units"]["both"]["last_scale_at"] is not None


async def test_without_memory_a_restart_forgets_the_cooldown() -> None:
    assert await restarted(None, gap_s=20.0) == [("both", 8)]


async def test_the_cooldown_ends_on_the_wall_clock_not_the_new_process_clock(tmp_path: Path) -> None:
    # 50 s and 65 s after the scale-up: the second decision is past the cooldown.
    assert await restarted(FileStore(tmp_path / "memory.json"), gap_s=50.0) == [("both", 8)]


async def test_an_unreadable_memory_is_a_cold_start_and_is_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "memory.json"
    path.write_text("{not json")
    actuator = FakeActuator(2)
    with caplog.at_level(logging.WARNING):
        await drive(config(FileStore(path)), actuator, waiting=20, ticks=1)
    assert actuator.calls == [("both", 5)]
    assert "not JSON" in caplog.text
    assert json.loads(path.read_text())["version"] == 1


def test_memory_file_is_where_a_supervised_daemon_keeps_it(tmp_path: Path) -> None:
    profile = load_deployment(
        PROFILES / "local-demo.yaml",
        ["autoscaler.enabled=true", "autoscaler.both.min=1", "autoscaler.both.max=4"],
    )
    layout = Layout.from_profile(profile).to_json()
    cfg, _ = build(Options(layout=layout, local="http://127.0.0.1:9", memory_file=tmp_path / "m.json"))
    assert isinstance(cfg.memory, FileStore) and cfg.memory.path == tmp_path / "m.json"
    assert build(Options(layout=layout, local="http://127.0.0.1:9"))[0].memory is None


def test_the_rendered_file_keeps_the_memory_in_its_configmap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = yaml.safe_load(GOLDEN.read_text())["data"]["autoscaler.yaml"]
    (tmp_path / "autoscaler.yaml").write_text(rendered)
    monkeypatch.setattr("infctl.kube.connect", lambda settings: SimpleNamespace(namespace=settings.namespace))
    cfg, _ = build(Options(file=tmp_path / "autoscaler.yaml"))
    assert isinstance(cfg.memory, ConfigMapStore)
    assert cfg.memory.where == "ConfigMap inference/kimi-k2-autoscaler-memory"
    given = build(Options(file=tmp_path / "autoscaler.yaml", memory_file=tmp_path / "m.json"))[0].memory
    assert isinstance(given, FileStore)  # --memory-file wins


async def test_a_failing_save_is_counted_every_time_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    store = FileStore(blocked / "memory.json")  # under a file: every save fails the same way
    with caplog.at_level(logging.WARNING):
        await drive(config(store), FakeActuator(2), waiting=20, ticks=3)
    said = [r.getMessage() for r in caplog.records if "a restart will start cold" in r.getMessage()]
    assert len(said) == 1 and "cannot write" in said[0]  # 3 saves failed; reading it at start-up failed too


async def test_a_slow_start_up_stays_known_across_a_restart(tmp_path: Path) -> None:
    """So a unit that may scale to 0 stays flagged over the router's hold (doctor, the alert) after it."""
    path = tmp_path / "memory.json"
    saved = record(ScalerState(), now=0.0, wall=0.0, startups={"both": (240.0,)})
    path.write_text(json.dumps(saved))
    await drive(config(FileStore(path)), FakeActuator(2), waiting=0, ticks=1, wall0=10.0)
    assert json.loads(path.read_text())["startups"] == {"both": [240.0]}
