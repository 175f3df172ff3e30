"""The admin API's pure decisions: token from the environment (fail closed), bearer parsing, body checks."""

from __future__ import annotations

from typing import Any

import pytest

from infctl.errors import ConfigError
from infctl.router.admin_validate import (
    active_config,
    admin_token_from_env,
    authorized,
    backend_from_json,
    bearer_token,
    check_exposure,
    check_weights,
    draining_flag,
    if_match_problem,
    loopback_host,
    parse_json,
    positive_weight,
    refuse_write,
    same_site,
    with_path_id,
)
from infctl.router.policies import build_policy
from infctl.router.policies.weights import UpstreamConfig, parse_upstreams


def test_a_named_token_env_that_is_unset_or_empty_refuses_to_start() -> None:
    for environ in ({}, {"ROUTER_TOKEN": ""}, {"ROUTER_TOKEN": "  \n"}):
        with pytest.raises(ConfigError, match="ROUTER_TOKEN") as err:
            admin_token_from_env("ROUTER_TOKEN", environ)
        # The Secret deploy creates (and renders a reference to), by its real name.
        assert err.value.hint is not None and "Secret '<release>-router-admin'" in err.value.hint
        assert "'<release>-admin'" not in err.value.hint and "--admin-token-secret" in err.value.hint
    # The default variable does not stand in for the one the file names.
    with pytest.raises(ConfigError):
        admin_token_from_env("ROUTER_TOKEN", {"INFCTL_ROUTER_ADMIN_TOKEN": "t"})


def test_token_from_env_reads_strips_and_rejects_inner_whitespace() -> None:
    assert admin_token_from_env("ROUTER_TOKEN", {"ROUTER_TOKEN": "s3cret\n"}) == "s3cret"
    assert admin_token_from_env(None, {"INFCTL_ROUTER_ADMIN_TOKEN": "t"}) == "t"
    assert admin_token_from_env(None, {}) is None  # nothing configured: open (the router warns)
    with pytest.raises(ConfigError, match="empty"):
        admin_token_from_env(None, {"INFCTL_ROUTER_ADMIN_TOKEN": ""})
    with pytest.raises(ConfigError, match="whitespace"):
        admin_token_from_env(None, {"INFCTL_ROUTER_ADMIN_TOKEN": "two words"})


def test_bearer_scheme_is_case_insensitive_and_token_exact() -> None:
    for header in ("Bearer s3cret", "bearer s3cret", "BEARER  s3cret ", "bEaReR s3cret"):
        assert bearer_token(header) == "s3cret"
        assert authorized(header, "s3cret")
    for refused in (None, "", "Bearer", "Bearer ", "Basic s3cret", "Bearers3cret", "s3cret"):
        assert bearer_token(refused) is None
        assert not authorized(refused, "s3cret")
    assert not authorized("Bearer S3CRET", "s3cret")
    assert authorized(None, None)  # no token configured
    # A header that is not UTF-8 reaches us surrogate-escaped (aiohttp's decoding): refused, never raised.
    assert not authorized("Bearer caf\udce9", "s3cret")
    assert authorized("Bearer caf\udce9", "caf\udce9")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "http://e:1", "weight": -1}, "weight"),
        ({"url": "http://e:1", "weight": 0}, "weight"),
        ({"url": "http://e:1", "weight": True}, "weight"),
        ({"url": "http://e:1", "weight": "2"}, "weight"),
        ({"url": "http://e:1", "role": "bogus"}, "role"),
        ({"url": "http://e:1", "dp_rank": "a"}, "dp_rank"),
        ({"url": "http://e:1", "dp_rank": "1"}, "dp_rank"),
        ({"url": "http://e:1", "dp_rank": -1}, "dp_rank"),
        ({"url": "ftp//x"}, "url"),
        ({"url": "ftp://x:1"}, "url"),
        ({"url": "http://"}, "url"),
        ({"url": "http://e:99999"}, "url"),
        ({"url": 5}, "url"),
        ({}, "url"),
        ({"url": "http://e:1", "models": "abc"}, "models"),
        ({"url": "http://e:1", "models": [1]}, "models"),
        ({"url": "http://e:1", "engine": "trt"}, "engine"),
        ({"url": "http://e:1", "kv_events": "localhost:5557"}, "kv_events"),
        ({"url": "http://e:1", "colour": "red"}, "colour"),
    ],
)
def test_bad_backends_are_refused_by_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        backend_from_json(body)
    assert err.value.message.startswith(f"{field}"), err.value.message


def test_a_good_backend_gets_the_router_files_defaults() -> None:
    backend, kv = backend_from_json(
        {"url": "http://e:8000/", "dp_rank": 2, "weight": 2, "models": ["m"], "kv_events": "tcp://e:5557"}
    )
    assert backend.id == "http://e:8000#dp2"  # as from_file names a rank
    assert backend.url == "http://e:8000" and backend.weight == 2.0 and backend.models == ("m",)
    assert kv == "tcp://e:5557"
    assert backend_from_json({"url": "http://e:1", "id": "a"})[0].id == "a"
    with pytest.raises(ConfigError):
        backend_from_json(["http://e:1"])


def test_non_finite_numbers_never_parse() -> None:
    assert parse_json('{"weight": 1.5}') == {"weight": 1.5}
    for raw in ('{"weight": NaN}', '{"weight": Infinity}', '{"weight": -Infinity}', '{"weight": 1e999}'):
        with pytest.raises(ConfigError):
            parse_json(raw)
    with pytest.raises(ConfigError, match="not valid JSON"):
        parse_json("{")


def test_draining_and_weight_bodies_are_type_checked() -> None:
    assert draining_flag(None) is True and draining_flag({}) is True
    assert draining_flag({"draining": False}) is False
    for body in ({"draining": "false"}, {"draining": 0}, {"draining": None}, {"drain": False}, [False]):
        with pytest.raises(ConfigError):
            draining_flag(body)
    assert positive_weight({"weight": 3}) == 3.0
    for body in ({"weight": 0}, {"weight": -1}, {"weight": True}, {"weight": "2"}, {"weight": 10**400}, {}):
        with pytest.raises(ConfigError):
            positive_weight(body)


def test_active_config_carries_the_live_upstreams_and_rebuilds_the_same_policy() -> None:
    live = UpstreamConfig(weights={"old": 60.0, "new": 40.0}, mirror_to="shadow", mirror_percent=5.0)
    assert active_config("least_load", None) == "least_load"
    config = active_config("least_load", live)
    assert build_policy(config).upstreams == live and build_policy(config).name == "least_load"
    custom = {"preset": "cache_aware", "settings": {"gate_abs": 8}, "upstreams": {"weights": {"x": 1}}}
    rebuilt = build_policy(active_config(custom, live))
    assert rebuilt.upstreams == live and rebuilt.settings.gate_abs == 8.0
    assert "upstreams" not in active_config(custom, None)
    assert build_policy(active_config(custom, UpstreamConfig())).upstreams is None


def test_a_put_body_takes_the_path_id_and_may_not_contradict_it() -> None:
    url = "http://10.0.0.7:8000"
    backend, _ = backend_from_json(with_path_id({"url": url, "dp_rank": 1}, "e7"))
    assert backend.id == "e7"  # not the URL-derived default (http://10.0.0.7:8000#dp1)
    assert with_path_id({"url": url, "id": "e7"}, "e7")["id"] == "e7"
    with pytest.raises(ConfigError, match="id: the body names 'e8' but the path names 'e7'"):
        with_path_id({"url": url, "id": "e8"}, "e7")
    with pytest.raises(ConfigError, match="JSON object"):
        backend_from_json(with_path_id(["not", "an", "object"], "e7"))


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.7", "router.example", ""])
def test_no_token_beyond_loopback_refuses_to_start_unless_told(host: str) -> None:
    with pytest.raises(ConfigError, match="refusing to start") as err:
        check_exposure(host, None, insecure=False)
    assert err.value.hint is not None and "--insecure-admin" in err.value.hint
    assert "INFCTL_ROUTER_ADMIN_TOKEN" in err.value.hint
    check_exposure(host, None, insecure=True)
    check_exposure(host, "s3cret", insecure=False)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.1.1", "::1", "[::1]", "localhost"])
def test_no_token_on_loopback_starts(host: str) -> None:
    check_exposure(host, None, insecure=False)


def test_writes_are_json_only_and_never_cross_site() -> None:
    here = "127.0.0.1:8000"
    # What a web page can send without a CORS preflight: a form or no-cors fetch, text/plain or a form type.
    for ct in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        refused = refuse_write(ct, None, here)
        assert refused is not None and refused[0] == 415 and "application/json" in refused[1], ct
    for origin in ("http://evil.example", "http://127.0.0.1:8001", "http://localhost:8000", "null", "x"):
        refused = refuse_write("application/json", origin, here)
        assert refused is not None and refused[0] == 403, origin
    assert refuse_write("application/json", None, here) is None  # curl, httpx: no Origin
    assert refuse_write("Application/JSON; charset=utf-8", "http://127.0.0.1:8000", here) is None
    assert refuse_write("application/json", "http://127.0.0.1:8000", None) is not None  # no Host: unknown


def test_same_site_compares_host_and_port_with_the_schemes_default() -> None:
    assert same_site("http://router.example", "router.example:80")
    assert same_site("https://router.example", "router.example")  # behind a TLS proxy
    assert same_site("http://[::1]:8000", "[::1]:8000")
    assert same_site("HTTP://Router.Example:8000", "router.example:8000")
    assert not same_site("http://router.example", "router.example:8000")
    assert not same_site("http://a@router.example:8000", "router.example:8000")
    assert not same_site("ftp://router.example:8000", "router.example:8000")
    assert not same_site("http://router.example:99999", "router.example:99999")


def test_a_tokenless_router_answers_loopback_hosts_only() -> None:
    for host in ("127.0.0.1:8000", "localhost", "LOCALHOST:8000", "[::1]:8000", "127.0.0.1"):
        assert loopback_host(host), host
    # DNS rebinding: the page's own name, now resolving to 127.0.0.1, is what its requests carry.
    for host in ("evil.example:8000", "127.0.0.1.evil.example", "10.0.0.7:8000", "", None, "[::1"):
        assert not loopback_host(host), host


def test_upstream_writes_need_if_match_naming_the_current_version() -> None:
    missing = if_match_problem(None, 3)
    assert missing is not None and missing[0] == 428 and "current: 3" in missing[1]
    assert if_match_problem("  ", 3) == missing
    for ok in ('"3"', "3", '"2", "3"', "*"):
        assert if_match_problem(ok, 3) is None, ok
    for stale in ('"2"', "2", 'W/"3"', '"3 "x'):
        refused = if_match_problem(stale, 3)
        assert refused is not None and refused[0] == 412, stale


def test_weights_name_known_groups_and_not_all_zero() -> None:
    check_weights(parse_upstreams({"weights": {"old": 100, "new": 0}}), {"old", "new"})
    with pytest.raises(ConfigError, match="'nosuch'") as err:
        check_weights(parse_upstreams({"weights": {"old": 1, "nosuch": 1}}), {"old", "new"})
    assert err.value.hint == "known groups: new, old (a backend's 'upstream')"
    for weights in ({"old": 0, "new": 0}, {"old": 0.0}):
        with pytest.raises(ConfigError, match="every group weighs 0"):
            parse_upstreams({"weights": weights})
    for bad in (-1, float("inf"), float("nan"), 10**400, True, "1"):
        with pytest.raises(ConfigError, match="finite non-negative"):
            parse_upstreams({"weights": {"old": bad}})
    assert parse_upstreams({"weights": {}}).weights == {}  # no split at all stays allowed
