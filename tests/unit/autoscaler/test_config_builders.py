"""Schedules, settings validation, units from profiles, the rendered Kubernetes file, and actuators."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from infctl.autoscaler.kube import KubeActuator, KubeTarget
from infctl.autoscaler.kubefile import parse_kube_file
from infctl.autoscaler.local import LocalActuator
from infctl.autoscaler.profile import Layout, initial_counts, policy_config, unit_configs
from infctl.autoscaler.schedule import parse_window, schedule_floor
from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.autoscaler.snapshot import UnitStatus
from infctl.config import AutoscalerSettings
from infctl.errors import ConfigError, KubeError

GOLDEN = Path(__file__).parents[2] / "golden" / "kimi-k2-pool" / "07-configmap-kimi-k2-autoscaler.yaml"


def test_schedule_windows_cross_midnight_and_pick_the_highest_floor() -> None:
    night, warm = parse_window("22:00-06:00 min=2"), parse_window("07:30-09:00 min=6 unit=decode")
    assert str(night) == "22:00-06:00 min=2" and warm.unit == "decode"
    assert night.is_open(23 * 3600) and night.is_open(3600) and not night.is_open(12 * 3600)
    assert schedule_floor([night, warm], "decode", 8 * 3600) == (6, warm)
    assert schedule_floor([night, warm], "prefill", 8 * 3600) == (0, None)
    assert schedule_floor([night], "both", None) == (0, None)


@pytest.mark.parametrize(
    "text",
    ["22:00 min=2", "25:00-01:00 min=1", "01:00-01:00 min=1", "01:00-02:00 max=3", "01:00-02:00 min=x"],
)
def test_bad_schedules_say_what_is_expected(text: str) -> None:
    with pytest.raises(ConfigError, match="schedule"):
        parse_window(text)


def test_settings_are_checked_when_built() -> None:
    unit = UnitConfig("both", 1, 4)
    with pytest.raises(ConfigError, match="queue thresholds"):
        PolicyConfig(units=(unit,), queue_up=1, queue_down=2)
    with pytest.raises(ConfigError, match="bounds need 0 <= min <= max"):
        PolicyConfig(units=(UnitConfig("both", 3, 2),))
    p, d = UnitConfig("prefill", 4, 4, (("prefill", 1),)), UnitConfig("decode", 1, 2, (("decode", 1),))
    with pytest.raises(ConfigError, match="ratio band"):
        PolicyConfig(units=(p, d), ratio=(0.25, 1.0))
    assert PolicyConfig(units=(unit,), down_window_s=300).scaled(0.01).down_window_s == 3


def layout(mode: str, **settings: Any) -> Layout:
    return Layout(
        release="r",
        mode=mode,
        engine="vllm",  # type: ignore[arg-type]
        settings=AutoscalerSettings.model_validate(settings),
        replicas=2,
        pools=(2, 4),
        groups=2,
        per_group=(1, 2),
    )


def test_units_per_mode() -> None:
    (both,) = unit_configs(layout("aggregated", both={"min": 1, "max": 6}))
    assert (both.name, both.min, both.max) == ("both", 1, 6)
    prefill, decode = unit_configs(layout("pool", decode={"min": 2, "max": 8}))
    assert (prefill.min, prefill.max) == (2, 2)  # no bounds: pinned at the deployed count
    assert (decode.min, decode.max, decode.members) == (2, 8, (("decode", 1),))
    # Group bounds count all groups' replicas: prefill 1..4 and decode 2..6 with 1+2 per group -> 1..3 groups.
    (group,) = unit_configs(layout("group", prefill={"min": 1, "max": 4}, decode={"min": 2, "max": 6}))
    assert (group.name, group.min, group.max) == ("group", 1, 3)
    assert initial_counts(layout("group")) == {"group": 2}
    with pytest.raises(ConfigError, match="no group count"):
        unit_configs(layout("group", prefill={"min": 3, "max": 3}, decode={"min": 1, "max": 2}))


def test_layout_travels_as_json_and_builds_the_policy() -> None:
    original = layout("pool", prefill={"min": 1, "max": 4}, kv_usage={"up": 0.9, "down": 0.3})
    again = Layout.from_json(original.to_json())
    assert again == original
    cfg = policy_config(again, ttft_slo_s=2.0)
    assert (cfg.kv_up, cfg.kv_down, cfg.ttft_slo_s, cfg.entry_role) == (0.9, 0.3, 2.0, "prefill")
    with pytest.raises(ConfigError, match="--layout"):
        Layout.from_json("{}")


def test_the_rendered_kubernetes_file_loads() -> None:
    data = yaml.safe_load(yaml.safe_load(GOLDEN.read_text())["data"]["autoscaler.yaml"])
    kf = parse_kube_file(data, "autoscaler.yaml")
    assert [(t.unit, t.kind) for t in kf.targets] == [
        ("kimi-k2-prefill", "LeaderWorkerSet"),
        ("kimi-k2-decode", "LeaderWorkerSet"),
    ]
    policy = kf.policy(ratio=(0.25, 1.0))
    assert [(u.min, u.max, u.roles) for u in policy.units] == [(1, 4, ("prefill",)), (2, 8, ("decode",))]
    assert (kf.file.router_url, kf.file.dry_run, policy.queue_up) == (
        "http://kimi-k2-router.inference.svc:8000",
        True,
        8,
    )
    with pytest.raises(ConfigError, match=r"a.yaml: targets\[0\].name: Field required"):
        parse_kube_file({"targets": [{"kind": "Deployment"}]}, "a.yaml")


class FakeScale:
    def __init__(self) -> None:
        self.objects = {
            ("Deployment", "prefill"): UnitStatus(2, 1),
            ("Deployment", "decode"): UnitStatus(4, 4),
        }

    async def read(self, kind: str, name: str) -> UnitStatus:
        if (kind, name) not in self.objects:
            raise KubeError(f"{kind} {name} not found", status=404)
        return self.objects[(kind, name)]

    async def scale(self, kind: str, name: str, replicas: int) -> None:
        self.objects[(kind, name)] = UnitStatus(replicas, self.objects[(kind, name)].ready)


async def test_kube_actuator_reads_and_scales_through_the_scale_api() -> None:
    api = FakeScale()
    targets = [
        KubeTarget("prefill", "Deployment", "prefill"),
        KubeTarget("decode", "Deployment", "decode"),
        KubeTarget("extra", "Deployment", "gone"),
    ]
    actuator = KubeActuator(targets, api, router_url="http://router:8000")
    fleet = await actuator.observe()
    assert fleet.units == {"prefill": UnitStatus(2, 1), "decode": UnitStatus(4, 4)}
    assert fleet.router_url == "http://router:8000" and "gone not found" in fleet.notes[0]
    await actuator.scale("prefill", 3)
    assert api.objects[("Deployment", "prefill")] == UnitStatus(3, 1)


async def test_local_actuator_speaks_the_supervisor_endpoint() -> None:
    calls: list[tuple[str, str, bytes]] = []
    status = {
        "release": "r",
        "router": "http://127.0.0.1:8000",
        "units": {
            "group": {
                "desired": 2,
                "ready": 1,
                "starting": 1,
                "stopping": 0,
                "max": 3,
                "replicas": [
                    {
                        "name": "engine-g0-prefill-0",
                        "url": "http://127.0.0.1:1",
                        "role": "prefill",
                        "group": "g0",
                        "pool": None,
                        "ready": True,
                    }
                ],
            }
        },
    }

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append((req.method, req.url.path, req.content))
        if req.method == "PUT":
            return httpx.Response(202, json={"unit": "group", "desired": 3})
        return httpx.Response(200, json=status)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as c:
        actuator = LocalActuator(c, "http://127.0.0.1:9000/")
        fleet = await actuator.observe()
        await actuator.scale("group", 3)
    assert fleet.units == {"group": UnitStatus(2, 1)} and fleet.router_url == "http://127.0.0.1:8000"
    assert fleet.replicas[0].role == "prefill" and fleet.replicas[0].group == "g0"
    assert calls[-1] == ("PUT", "/scale/group", b'{"replicas":3}')
