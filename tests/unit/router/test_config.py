from dataclasses import fields
from pathlib import Path

import pytest

from infctl.config import BackendEntry, RouterFile, load_router
from infctl.errors import ConfigError
from infctl.router.config import RouterConfig, from_file
from infctl.router.kv_events import KVSource

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
    assert cfg.kv_sources == (
        KVSource(
            endpoint="tcp://10.0.0.2:5557",
            backends={0: "http://10.0.0.2:8000#dp0", 1: "http://10.0.0.2:8000#dp1"},
        ),
    )


def test_bad_router_file_names_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text("backends:\n  - url: http://a:1\n    role: leader\n")
    with pytest.raises(ConfigError) as err:
        load_router(path)
    assert f"{path}:3: backends[0].role" in err.value.message


def test_a_minimal_file_keeps_every_daemon_default() -> None:
    """RouterFile validates the YAML, RouterConfig is what serve runs on; a key left out of the file must
    give the daemon's own default, so the two declarations cannot drift apart."""
    cfg = from_file(RouterFile(backends=[BackendEntry(url="http://e:8000")]))
    shared = {f.name for f in fields(RouterConfig)} & set(RouterFile.model_fields) - {"backends", "discovery"}
    assert len(shared) >= 15
    daemon = RouterConfig(backends=())
    assert {k: getattr(cfg, k) for k in shared} == {k: getattr(daemon, k) for k in shared}
