import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from infctl.config import BackendEntry, RouterFile, load_router
from infctl.config.router import RouterOptions
from infctl.config.settings import RouterSettings
from infctl.errors import ConfigError
from infctl.router.config import RouterConfig, from_file
from infctl.router.discovery import DiscoverySettings
from infctl.router.health import HealthPolicy
from infctl.router.kv_events import KVSource
from infctl.router.policies import PRESETS, PDSettings
from infctl.router.pool import BackendPool
from infctl.router.server import build_state
from infctl.sim.cluster.admission import AdmissionSettings

ROUTER_YAML = """\
port: 9000
engine: sglang
policy: {preset: cache_aware, settings: {gate_abs: 4}}
session_header: X-Session-Id
scrape_interval_s: 0.05
backends:
  - url: http://10.0.0.1:8000/
    role: prefill
    group: g0
  - url: http://10.0.0.2:8000
    role: decode
    group: g0
    engine: vllm
    dp_rank: 0
    kv_events: tcp://10.0.0.2:5557
  - url: http://10.0.0.2:8000
    role: decode
    group: g0
    engine: vllm
    dp_rank: 1
    kv_events: tcp://10.0.0.2:5557
"""


def test_router_file_becomes_daemon_settings(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text(ROUTER_YAML)
    cfg = from_file(load_router(path), admin_token="t")
    assert cfg.port == 9000 and cfg.scrape_interval_s == 0.05 and cfg.admin_token == "t"
    assert cfg.session_header == "x-session-id"
    assert cfg.policy == {"preset": "cache_aware", "settings": {"gate_abs": 4}}
    assert [b.id for b in cfg.backends] == [
        "http://10.0.0.1:8000",
        "http://10.0.0.2:8000#dp0",
        "http://10.0.0.2:8000#dp1",
    ]
    assert [b.engine for b in cfg.backends] == ["sglang", "vllm", "vllm"]
    # Each DP rank publishes on the base port + its rank (vLLM's and SGLang's convention).
    assert cfg.kv_sources == (
        KVSource(
            endpoint="tcp://10.0.0.2:5557",
            backends={0: "http://10.0.0.2:8000#dp0", None: "http://10.0.0.2:8000#dp0"},
        ),
        KVSource(
            endpoint="tcp://10.0.0.2:5558",
            backends={1: "http://10.0.0.2:8000#dp1", None: "http://10.0.0.2:8000#dp1"},
        ),
    )


def test_whole_engines_sharing_an_endpoint_share_one_subscription() -> None:
    rf = RouterFile(
        backends=[
            BackendEntry(url="http://a:1", kv_events="tcp://a:5557"),
            BackendEntry(url="http://a:1", id="twin", kv_events="tcp://a:5557"),
        ]
    )
    assert [s.endpoint for s in from_file(rf).kv_sources] == ["tcp://a:5557"]


def test_each_backend_carries_its_own_bootstrap_port() -> None:
    rf = RouterFile(backends=[BackendEntry(url="http://a:1", role="prefill", bootstrap_port=9001),
                              BackendEntry(url="http://b:1", role="prefill")])  # fmt: skip
    assert [b.bootstrap_port for b in from_file(rf).backends] == [9001, None]
    with pytest.raises(ValueError, match="bootstrap_port"):
        BackendEntry(url="http://a:1", bootstrap_port=0)


def test_a_rank_entry_may_name_its_engines_rank_count() -> None:
    rf = RouterFile(backends=[BackendEntry(url="http://a:1", role="prefill", dp_rank=16, dp_size=17),
                              BackendEntry(url="http://a:1", role="prefill", dp_rank=1)])  # fmt: skip
    assert [(b.dp_rank, b.dp_size) for b in from_file(rf).backends] == [(16, 17), (1, None)]
    for wrong in ({"dp_rank": 17}, {}):
        with pytest.raises(ValueError, match=r"dp_size 17 with .*expected a dp_rank below it"):
            BackendEntry(url="http://a:1", dp_size=17, **wrong)


def test_a_dp_rank_needs_a_kv_events_port() -> None:
    rf = RouterFile(backends=[BackendEntry(url="http://a:1", dp_rank=1, kv_events="tcp://a")])
    with pytest.raises(ConfigError, match="kv_events"):
        from_file(rf)


SETTINGS_YAML = """backends: [{url: "http://e:8000"}]
probe_timeout_s: 0.5
admission_queue: 16
admission_deadline_s: 4
short_prompt_tokens: 512
max_prompt_chars: 1000
max_body_bytes: 4096
server: lean
header_timeout_s: 5
body_timeout_s: 12
max_connections: 256
pd_mode: pool
pd_cross_group_cost: 0.25
health: {failures_to_eject: 2, base_backoff_s: 0.5, max_backoff_s: 8, stable_after_s: 20}
discovery: {namespace: ns, selector: app=e, watch_timeout_s: 60, retry_max_s: 5}
"""


def test_every_runtime_setting_is_settable_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text(SETTINGS_YAML)
    cfg = from_file(load_router(path))
    assert (cfg.probe_timeout_s, cfg.admission_queue, cfg.admission_deadline_s) == (0.5, 16, 4.0)
    assert (cfg.short_prompt_tokens, cfg.max_prompt_chars, cfg.max_body_bytes) == (512, 1000, 4096)
    assert (cfg.server, cfg.header_timeout_s, cfg.body_timeout_s, cfg.max_connections) == ("lean", 5, 12, 256)
    assert (cfg.pd_mode, cfg.pd_cross_group_cost) == ("pool", 0.25)
    assert cfg.health == HealthPolicy(
        failures_to_eject=2, base_backoff_s=0.5, max_backoff_s=8.0, stable_after_s=20.0
    )
    assert cfg.discovery == DiscoverySettings(
        namespace="ns", selector="app=e", port=8000, engine="vllm", watch_timeout_s=60, retry_max_s=5.0
    )


async def test_the_pd_settings_reach_the_state_the_proxy_routes_with(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text('backends: [{url: "http://e:8000"}]\npd_mode: pool\npd_cross_group_cost: 0.25\n')
    state = build_state(from_file(load_router(path)))
    try:
        pd = state.pd_settings  # what the proxy hands pick_pd
        assert (pd.mode, pd.min_uncached_tokens, pd.cross_group_cost) == ("pool", 512, 0.25)
    finally:
        if state.http1 is not None:
            state.http1.close()
        await state.session.close()


@pytest.mark.parametrize(
    "line",
    [
        "admission_queue: -1",
        "health: {max_backoff_s: 0}",
        "health: {jitter: 1}",
        "max_prompt_chars: 0",
        "server: nginx",
        "header_timeout_s: 0",
        "max_connections: 0",
        "pd_cross_group_cost: -0.1",
    ],
)
def test_bad_runtime_settings_are_refused(tmp_path: Path, line: str) -> None:
    path = tmp_path / "router.yaml"
    path.write_text('backends: [{url: "http://e:8000"}]\n' + line + "\n")
    with pytest.raises(ConfigError):
        load_router(path)


def test_bad_router_file_names_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text("backends:\n  - url: http://a:1\n    role: leader\n")
    with pytest.raises(ConfigError) as err:
        load_router(path)
    assert f"{path}:3: backends[0].role" in err.value.message


def test_each_router_setting_is_declared_once() -> None:
    """RouterOptions declares every setting the file and the daemon share, default and doc; neither model
    declares one again (a second declaration would be a second default, free to drift)."""
    options = set(RouterOptions.model_fields)
    assert len(options) >= 25
    for model in (RouterFile, RouterConfig):
        assert issubclass(model, RouterOptions)
        assert not options & set(vars(model).get("__annotations__", {})), model.__name__
    assert set(RouterFile.model_fields) & set(RouterConfig.model_fields) == options | {
        "backends",
        "discovery",
    }


def test_a_minimal_file_keeps_every_default() -> None:
    cfg = from_file(RouterFile(backends=[BackendEntry(url="http://e:8000")]))
    defaults = RouterOptions()
    assert {k: getattr(cfg, k) for k in RouterOptions.model_fields} == dict(defaults)
    assert dict(RouterConfig(backends=())) == {**dict(defaults), **dict(RouterConfig(backends=()))}


def _stated_default(doc: str) -> str | None:
    """What a field doc says the default is (``Default 8 MiB.`` -> ``8 MiB``); None when it names none
    or names it in words (``Default: the file's engine``)."""
    found = re.search(r"\bDefault:? (.+?)(?: \(|: |\.$|\. |$)", " ".join(doc.split()))
    if found is None or found.group(1).startswith(("the ", "None")):
        return None
    return found.group(1)


def _as_value(text: str) -> object:
    if text in ("true", "false"):
        return text == "true"
    number = re.fullmatch(r"(\d+(?:,\d{3})*(?:\.\d+)?)( MiB)?", text)
    if number is None:
        return text
    value = float(number.group(1).replace(",", ""))
    return value * 1024 * 1024 if number.group(2) else value


@pytest.mark.parametrize(
    "model", [RouterOptions, HealthPolicy, DiscoverySettings, BackendEntry, RouterSettings]
)
def test_every_default_a_doc_states_is_the_default(model: type[BaseModel]) -> None:
    """The field docs are what ``infctl router --help`` prints: a default they state is the one in force."""
    stated = 0
    for name, info in model.model_fields.items():
        said = _stated_default(info.description or "")
        if said is None:
            continue
        stated += 1
        default = info.get_default(call_default_factory=True)
        assert _as_value(said) == default, (
            f"{model.__name__}.{name}: the doc says {said!r}, the code {default!r}"
        )
    if model is RouterOptions:  # every setting but the health section (whose fields say theirs)
        assert stated == len(model.model_fields) - 1


def test_the_copies_the_decision_code_keeps_agree_with_the_router_settings() -> None:
    """The pure layers keep their own defaults (the simulator and the tests build them without a router):
    the PD pairing (``policies.pd``) and the pool's health policy must start where the router does."""
    d = RouterOptions()
    assert PDSettings() == PDSettings(
        mode=d.pd_mode, min_uncached_tokens=d.pd_min_uncached_tokens, cross_group_cost=d.pd_cross_group_cost
    )
    assert BackendPool(()).health_policy == d.health
    deployed = RouterSettings()  # a deployment profile's router section
    assert (deployed.policy, deployed.port) == (d.policy, d.port)
    assert AdmissionSettings() == AdmissionSettings(
        d.admission_queue, d.admission_deadline_s, d.short_prompt_tokens
    )


def test_the_policy_doc_names_every_preset() -> None:
    doc = RouterOptions.model_fields["policy"].description or ""
    assert all(name in doc for name in PRESETS), sorted(n for n in PRESETS if n not in doc)


def test_a_backend_entry_and_its_routing_target_share_every_field_and_default() -> None:
    # Two models on purpose (the file's validates input; the target is the pure layer's frozen record);
    # this keeps them from drifting apart.
    import dataclasses

    from infctl.config.router import BackendEntry
    from infctl.router.config import backend_of
    from infctl.router.snapshot import Backend

    target = {f.name: f for f in dataclasses.fields(Backend)}
    for name, field in BackendEntry.model_fields.items():
        if name in ("id", "kv_events"):  # the id is resolved; KV events feed the index, not the target
            continue
        if field.is_required():  # the url
            assert name in target, name
            continue
        assert name in target, name
        default = target[name].default
        expected = field.get_default(call_default_factory=True)
        assert default == (tuple(expected) if isinstance(expected, list) else expected) or name == "engine", (
            name
        )
    made = backend_of(BackendEntry(url="http://e:8000/", models=["m"]), "x", engine="vllm")
    assert (made.url, made.models, made.engine) == ("http://e:8000", ("m",), "vllm")
