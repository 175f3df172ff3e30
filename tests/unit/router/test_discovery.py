import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from infctl.router import RequestInfo
from infctl.router.config import RouterConfig
from infctl.router.discovery import (
    Discovered,
    DiscoverySettings,
    PodTargets,
    changes,
    targets_from_pod,
    wanted,
)
from infctl.router.kv_events import KVSource
from infctl.router.server import RouterState, build_state
from infctl.sim.kv_events import KVEventPublisher
from infctl.telemetry.kv_events import BlockStored

S = DiscoverySettings(namespace="ns", selector="a=b", port=8000, engine="vllm")


def pod(
    name: str,
    ip: str | None = "10.0.0.1",
    ready: bool = True,
    annotations: dict[str, str] | None = None,
    kv_port: int | None = None,
    **labels: str,
) -> dict[str, Any]:
    ports: list[dict[str, Any]] = [{"name": "http", "containerPort": 8100}]
    if kv_port is not None:
        ports.append({"name": "kv-events", "containerPort": kv_port})
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "engine", "ports": ports}]},
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def targets(p: dict[str, Any]) -> PodTargets:
    t = targets_from_pod(p, S)
    assert t is not None
    return t


def test_ready_pod_becomes_a_backend_with_its_labels() -> None:
    t = targets(
        pod("p", **{"infctl.io/role": "prefill", "infctl.io/group": "g1", "infctl.io/engine": "sglang"})
    )
    (b,) = t.backends
    assert (b.id, b.role, b.group, b.engine) == ("http://10.0.0.1:8100", "prefill", "g1", "sglang")
    assert b.upstream == "default"
    assert (b.dp_rank, t.kv_sources, t.problems) == (None, (), ())


def test_unready_unscheduled_or_terminating_pods_are_not_backends() -> None:
    assert targets_from_pod(pod("p", ready=False), S) is None
    assert targets_from_pod(pod("p", ip=None), S) is None
    terminating = pod("p")
    terminating["metadata"]["deletionTimestamp"] = "2026-11-30T00:00:00Z"
    assert targets_from_pod(terminating, S) is None


def test_unknown_role_label_falls_back_to_both_and_default_port() -> None:
    p = pod("p", **{"infctl.io/role": "leader"})
    p["spec"]["containers"][0]["ports"] = []
    (b,) = targets(p).backends
    assert b.role == "both" and b.url == "http://10.0.0.1:8000" and b.engine == "vllm"


def test_upstream_group_comes_from_a_label_or_an_annotation() -> None:
    assert targets(pod("p", **{"infctl.io/upstream": "new"})).backends[0].upstream == "new"
    assert targets(pod("p", annotations={"infctl.io/upstream": "old"})).backends[0].upstream == "old"


def test_a_data_parallel_pod_is_one_backend_per_rank_with_one_kv_subscription_each() -> None:
    t = targets(pod("p", kv_port=5557, annotations={"infctl.io/data-parallel-size": "3"}))
    assert [(b.id, b.url, b.dp_rank) for b in t.backends] == [
        (f"http://10.0.0.1:8100#dp{r}", "http://10.0.0.1:8100", r) for r in range(3)
    ]
    # Each rank knows its engine's rank count: an SGLang PD prefill's bootstrap room is drawn for it.
    assert [b.dp_size for b in t.backends] == [3, 3, 3]
    assert targets(pod("p")).backends[0].dp_size is None
    # vLLM and SGLang bind rank r's publisher on the base port + r.
    assert [(s.endpoint, dict(s.backends)) for s in t.kv_sources] == [
        (
            f"tcp://10.0.0.1:{5557 + r}",
            {r: f"http://10.0.0.1:8100#dp{r}", None: f"http://10.0.0.1:8100#dp{r}"},
        )
        for r in range(3)
    ]


def test_kv_events_from_the_named_port_or_an_annotation_that_overrides_it() -> None:
    assert targets(pod("p", kv_port=5557)).kv_sources[0].endpoint == "tcp://10.0.0.1:5557"
    assert (
        targets(pod("p", kv_port=5557, annotations={"infctl.io/kv-events": "6000"})).kv_sources[0].endpoint
        == "tcp://10.0.0.1:6000"
    )
    bind = targets(pod("p", annotations={"infctl.io/kv-events": "tcp://*:5557"}))
    assert bind.kv_sources[0].endpoint == "tcp://10.0.0.1:5557"  # a bind address means the pod itself
    elsewhere = targets(pod("p", annotations={"infctl.io/kv-events": "tcp://10.9.9.9:7000"}))
    assert elsewhere.kv_sources[0].endpoint == "tcp://10.9.9.9:7000"


def test_values_that_cannot_be_used_are_reported_and_ignored_not_fatal() -> None:
    t = targets(pod("p", annotations={"infctl.io/data-parallel-size": "two", "infctl.io/kv-events": "zmq"},
                    **{"infctl.io/engine": "trtllm"}))  # fmt: skip
    (b,) = t.backends
    assert b.dp_rank is None and b.engine == "vllm" and t.kv_sources == ()
    assert len(t.problems) == 3 and any("data-parallel-size" in p for p in t.problems)


def test_a_prefills_bootstrap_port_from_the_named_port_or_a_label_that_overrides_it() -> None:
    p = pod("p", **{"infctl.io/role": "prefill", "infctl.io/engine": "sglang"})
    assert targets(p).backends[0].bootstrap_port is None  # the engine's default
    p["spec"]["containers"][0]["ports"].append({"name": "bootstrap", "containerPort": 8998})  # as rendered
    assert targets(p).backends[0].bootstrap_port == 8998
    p["metadata"]["annotations"]["infctl.io/bootstrap-port"] = "9001"
    assert targets(p).backends[0].bootstrap_port == 9001
    dp = {"infctl.io/data-parallel-size": "2"}
    ranks = pod("p", annotations=dp, **{"infctl.io/bootstrap-port": "9002"})
    assert [b.bootstrap_port for b in targets(ranks).backends] == [9002, 9002]
    bad = targets(pod("p", **{"infctl.io/bootstrap-port": "70000"}))
    assert bad.backends[0].bootstrap_port is None and "bootstrap-port" in bad.problems[0]


def test_a_rendered_sglang_prefill_pod_names_the_profiles_bootstrap_port() -> None:
    import yaml

    rendered = Path(__file__).parents[2] / "golden/deepseek-v3-group"
    # The number in front is the object's place in the apply order, which other objects shift.
    (golden,) = rendered.glob("*-leaderworkerset-deepseek-v3-g0-prefill.yaml")
    leader = yaml.safe_load(golden.read_text())["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    running = {"phase": "Running", "podIP": "10.0.0.8", "conditions": [{"type": "Ready", "status": "True"}]}
    pod = {"metadata": {**leader["metadata"], "name": "p", "namespace": "ns"}, "spec": leader["spec"],
           "status": running}  # fmt: skip
    backends = targets(pod).backends
    # deepseek-v3-sglang.yaml's pd.bootstrap_port, for each of the pod's two data-parallel ranks.
    assert [(b.role, b.engine, b.bootstrap_port) for b in backends] == [("prefill", "sglang", 8998)] * 2


def test_changes_take_out_what_left_or_changed_and_put_in_what_is_new_or_changed() -> None:
    a, b, c = (
        targets(pod("a", ip="10.0.0.1")),
        targets(pod("b", ip="10.0.0.2")),
        targets(pod("c", ip="10.0.0.3")),
    )
    b2 = targets(pod("b", ip="10.0.0.2", **{"infctl.io/group": "g2"}))
    remove, add = changes({"ns/a": a, "ns/b": b}, {"ns/b": b2, "ns/c": c})
    assert sorted(remove) == ["ns/a", "ns/b"] and add == {"ns/b": b2, "ns/c": c}
    assert changes({"ns/a": a}, {"ns/a": a}) == ([], {})


def test_wanted_keeps_only_ready_pods_of_a_full_list() -> None:
    want = wanted([pod("a", ip="10.0.0.1"), pod("b", ready=False), pod("c", ip="10.0.0.3")], S)
    assert sorted(want) == ["ns/a", "ns/c"]


def test_an_ipv6_pod_gets_a_bracketed_url_and_kv_endpoint() -> None:
    t = targets(pod("p", ip="fd00::5", kv_port=5557))
    assert t.backends[0].url == "http://[fd00::5]:8100"
    assert urlsplit(t.backends[0].url).hostname == "fd00::5" and urlsplit(t.backends[0].url).port == 8100
    assert t.kv_sources[0].endpoint == "tcp://[fd00::5]:5557"
    for value in ["5557", "tcp://*:5557", "tcp://[::]:5557"]:
        bind = targets(pod("p", ip="fd00::5", annotations={"infctl.io/kv-events": value}))
        assert bind.kv_sources[0].endpoint == "tcp://[fd00::5]:5557"
    dp = pod("p", ip="fd00::5", kv_port=5557)
    dp["metadata"]["labels"]["infctl.io/data-parallel-size"] = "2"
    ranks = targets(dp)
    assert [s.endpoint for s in ranks.kv_sources] == ["tcp://[fd00::5]:5557", "tcp://[fd00::5]:5558"]


@asynccontextmanager
async def router_and_engine() -> AsyncIterator[tuple[RouterState, KVEventPublisher]]:
    """A router state with a precise prefix index (no server) and an engine's KV-event publisher."""
    publisher = KVEventPublisher("tcp://127.0.0.1:*")  # data-parallel rank 0
    state = build_state(RouterConfig(backends=(), policy={"preset": "cache_aware", "index": "precise"}))
    try:
        yield state, publisher
    finally:
        state.unfollow_all_kv_events()
        await asyncio.gather(*state.background, return_exceptions=True)
        publisher.close()
        if state.http1 is not None:
            state.http1.close()
        await state.session.close()


async def until(condition: Callable[[], bool], publisher: KVEventPublisher | None = None) -> None:
    """Poll ``condition`` (20 s at most); with ``publisher``, publish a block each time: ZMQ's slow joiner
    drops what is published before a subscription has connected."""
    async with asyncio.timeout(20):
        while not condition():
            if publisher is not None:
                publisher.publish([BlockStored([7], None, [], 16)])
            await asyncio.sleep(0.01)


def credited(state: RouterState) -> set[str]:
    """The backends the prefix index credits with the published block."""
    matches = state.core.matches(RequestInfo("p", prompt_tokens=16, block_hashes=(7,)))
    return {b for b, n in matches.items() if n}


async def test_discovery_and_the_admin_api_share_one_subscription_per_endpoint() -> None:
    """Discovery had its own subscriptions beside the admin API's: an endpoint both named was subscribed
    twice (each batch applied twice), and a pod leaving dropped the endpoint from the admin's list while
    its subscription went on unlisted. Now one subscription per endpoint credits both and outlives the pod."""
    async with router_and_engine() as (state, publisher):
        state.follow_kv_events(KVSource(publisher.endpoint, {0: "admin#dp0"}))  # the admin API's
        found = Discovered(state, S)
        engine = pod("e", ip="127.0.0.1", annotations={"infctl.io/kv-events": publisher.endpoint})
        found.on_list([engine])
        (source,) = state.kv_sources
        assert dict(source.backends) == {0: "admin#dp0", None: "http://127.0.0.1:8100"}
        assert list(state.kv_stops) == [publisher.endpoint]
        found.on_event("DELETED", engine)
        (source,) = state.kv_sources
        assert dict(source.backends) == {0: "admin#dp0"}
        await until(lambda: credited(state) == {"admin#dp0"}, publisher)  # still subscribed


async def test_a_subscription_ends_with_the_last_backend_it_credits() -> None:
    """The admin path never stopped a subscription: a removed backend's endpoint stayed subscribed (and
    listed, crediting nobody) for the router's life."""
    async with router_and_engine() as (state, publisher):
        state.follow_kv_events(KVSource(publisher.endpoint, {0: "a#dp0", None: "a#dp0"}))
        await until(lambda: credited(state) == {"a#dp0"}, publisher)
        (subscription,) = state.background
        state.unfollow_kv_events("other")  # credits nobody here: changes nothing
        assert len(state.kv_sources) == 1 and not subscription.done()
        state.unfollow_kv_events("a#dp0")
        assert state.kv_sources == [] and state.kv_stops == {}
        await until(subscription.done)
