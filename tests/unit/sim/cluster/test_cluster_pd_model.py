"""The PD layout, the KV link model and the admission room: pure pieces of the cluster simulator."""

from __future__ import annotations

import pytest

from infctl.errors import ConfigError
from infctl.router.pool import BackendPool
from infctl.router.settings import PolicySettings
from infctl.router.snapshot import Backend, Snapshot
from infctl.sim.cluster import SimConfig
from infctl.sim.cluster.admission import AdmissionRoom, AdmissionSettings
from infctl.sim.cluster.pd import CROSS_GROUP_SHARE, PDLayout, parse_layout, transfer_seconds
from infctl.sim.profiles import get_profile
from infctl.sim.scheduler import EngineCore
from infctl.sim.types import SimRequest
from infctl.telemetry.signals import EngineSignals

LLAMA = get_profile("llama3-8b-h100")


@pytest.mark.parametrize(
    ("text", "counts"), [("1P1D", (1, 1)), ("2p+3d", (2, 3)), (" 4P 1D ", (4, 1)), ("10P2D", (10, 2))]
)
def test_parse_layout(text: str, counts: tuple[int, int]) -> None:
    layout = parse_layout(text, groups=3, mode="pool", min_uncached_tokens=64)
    assert (layout.prefill, layout.decode) == counts
    assert (layout.groups, layout.mode, layout.min_uncached_tokens) == (3, "pool", 64)
    assert layout.size == 3 * sum(counts)


@pytest.mark.parametrize("text", ["1P", "PD", "1D1P", "1P1D1B", "-1P1D", ""])
def test_parse_layout_refuses_other_forms(text: str) -> None:
    with pytest.raises(ConfigError, match="xPyD"):
        parse_layout(text)


def test_layout_rejects_zero_counts_and_unknown_modes() -> None:
    with pytest.raises(ConfigError, match=">= 1"):
        parse_layout("0P1D")
    with pytest.raises(ConfigError, match="group or pool"):
        parse_layout("1P1D", mode="mesh")
    with pytest.raises(ConfigError, match="> 0 GB/s"):
        PDLayout(cross_group_gbps=0)


def test_engines_are_named_by_group_prefill_first() -> None:
    assert PDLayout(2, 1, groups=2).engines() == [
        ("g0-p0", "prefill", "g0"), ("g0-p1", "prefill", "g0"), ("g0-d0", "decode", "g0"),
        ("g1-p0", "prefill", "g1"), ("g1-p1", "prefill", "g1"), ("g1-d0", "decode", "g1"),
    ]  # fmt: skip


def test_transfer_time_is_bytes_over_bandwidth() -> None:
    # 1,000 tokens of Llama-3-8B KV (128 KiB each) over 25 GB/s: 131.072 MB / 25 GB/s.
    assert transfer_seconds(1000, 131_072, 25.0) == pytest.approx(5.24288e-3)
    assert transfer_seconds(0, 131_072, 25.0) == 0.0
    assert transfer_seconds(1000, 131_072, 12.5) == pytest.approx(2 * 5.24288e-3)


def test_links_default_to_the_profile_nic_and_a_slower_spine() -> None:
    layout = PDLayout()
    assert layout.link_gbps(LLAMA, "g0", "g0") == LLAMA.kv_transfer_gbps == 25.0
    assert layout.link_gbps(LLAMA, "g0", "g1") == 25.0 * CROSS_GROUP_SHARE
    custom = PDLayout(intra_group_gbps=100, cross_group_gbps=10)
    assert (custom.link_gbps(LLAMA, "g1", "g1"), custom.link_gbps(LLAMA, "g1", "g0")) == (100, 10)


def test_each_remote_prefill_is_timed_on_its_own_link() -> None:
    def ready_at(gbps: float | None) -> float | None:
        core = EngineCore(LLAMA, role="decode")
        req = SimRequest("r", list(range(1000)), 4, 0.0, remote_prefill=True, kv_transfer_gbps=gbps)
        core.add_request(req, 0.0)
        return core.next_ready_time()

    assert ready_at(None) == pytest.approx(transfer_seconds(1000, LLAMA.kv_bytes_per_token, 25.0))
    assert ready_at(5.0) == pytest.approx(transfer_seconds(1000, LLAMA.kv_bytes_per_token, 5.0))


def test_config_requires_the_layout_size_and_no_autoscaling() -> None:
    with pytest.raises(ConfigError, match="PD layout's 4"):
        SimConfig(engines=3, pd=PDLayout(1, 1, groups=2))
    from infctl.sim.cluster import AutoscaleSettings

    with pytest.raises(ConfigError, match="autoscale"):
        SimConfig(engines=2, pd=PDLayout(), autoscale=AutoscaleSettings())


def _snapshot(queue: float) -> Snapshot:
    pool = BackendPool([Backend(id="a")])
    pool.record_signals("a", EngineSignals(queue=queue), 0.0)
    return pool.snapshot(0.0)


def test_admission_room_holds_short_first_and_refuses_when_full() -> None:
    settings = AdmissionSettings(queue=3, short_prompt_tokens=100)
    room: AdmissionRoom[str] = AdmissionRoom(settings, PolicySettings())
    busy, idle = _snapshot(queue=50), _snapshot(queue=0)
    assert room.must_wait(busy) and not room.must_wait(idle)
    assert room.hold("long-1", 5000) is not None
    assert room.hold("long-2", 5000) is not None
    short = room.hold("short", 10)
    assert room.must_wait(idle)  # others wait: a newcomer queues behind them
    assert room.hold("over", 10) is None
    assert room.refused == {"admission_full": 1}
    assert room.release(busy) is None
    assert short is not None and room.release(idle) == "short"
    assert room.expire(short) is None  # released before its deadline: no 429
    assert room.release(idle) == "long-1"
    assert room.drain() == ["long-2"] and room.waiting == 0


def test_admission_room_deadline_refuses_only_waiting_requests() -> None:
    room: AdmissionRoom[str] = AdmissionRoom(AdmissionSettings(queue=4), PolicySettings())
    a, b = room.hold("a", 10), room.hold("b", 10)
    assert a is not None and b is not None
    assert room.expire(a) == "a"
    assert room.release(_snapshot(queue=0)) == "b"
    assert room.refused == {"admission_deadline": 1}
    assert (room.held, room.admitted_after_wait) == (2, 1)
