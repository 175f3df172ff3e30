"""A third engine is one adapter: registered here, outside every other package, it validates, renders for
Kubernetes (single- and multi-node), plans on the local target and is taken by the router file, discovery
and doctor, with no change anywhere else.

What a third engine would still need outside ``infctl.engines`` (by design, not engine facts):
``infctl.sim`` to simulate it (a personality), and ``infctl.config`` only for profile knobs it adds
(a new ``pd.kv_connector`` or ``kv_offload.backend`` value is a new value of the profile's schema).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from infctl.config import ModelProfile, load_deployment, load_model, load_router
from infctl.doctor.engine_eval import detect_engine
from infctl.engines import (
    DIST_PORT,
    ENGINES,
    CacheReset,
    EngineAdapter,
    HealthSpec,
    MultiNodeArgs,
    PDEndpoint,
    PDStyle,
    ProfileRules,
    RankPin,
    Role,
    SignalMetrics,
    get_adapter,
    register,
    unregister,
)
from infctl.engines.base import Body, Diagnostics, SignalCheck
from infctl.engines.cmdline import LWS_LEADER_ADDRESS, LWS_WORKER_INDEX
from infctl.engines.versions import Version
from infctl.errors import ConfigError, EngineError
from infctl.local.plan import build_plan
from infctl.manifests import labels as L
from infctl.manifests import render, validate_objects
from infctl.router.discovery import DiscoverySettings, targets_from_pod
from infctl.telemetry import EngineSignals, LoadReport, MetricFamilies, parse_metrics
from infctl.telemetry.prometheus import value

NAME = "toyserve"
CLUSTER = {"name": "c", "switch_label": "example.com/switch", "gpus_per_node": 8}


class ToyServe:
    """A made-up engine: its own metric names, health path, flags, multi-node flags and host ports."""

    name = NAME
    metrics_path = "/metrics"
    metrics_hint = "toyserve serves /metrics on its HTTP port"
    wanted_metrics = frozenset({"toy:queue", "toy:running", "toy:kv"})
    health = HealthSpec(path="/ready", fatal_statuses=(410,))
    load_paths: tuple[str, ...] = ()
    cache_reset = CacheReset(path="/cache/reset")
    pd_style: PDStyle = "sequential"
    decode_serves_alone = True
    dp_rank_header: str | None = "x-toy-rank"
    dp_rank_label = "rank"
    rank_capacity_is_engine_total = False
    default_image = "example.com/toyserve:1.2.0"
    flag_versions: Mapping[str, Version] = {"--pd-role": (1, 1, 0)}
    oldest_checked: Version = (1, 0, 0)
    diagnostics = Diagnostics(signals=(SignalCheck("queue", ("toy:queue",), "router, autoscaler"),))
    signal_metrics = SignalMetrics(
        queue="toy:queue",
        running="toy:running",
        kv_usage="toy:kv",
        ttft="toy:ttft_seconds",
        ttft_buckets=(0.5, 1.0, 5.0),
        itl="toy:itl_seconds",
        e2e="toy:e2e_seconds",
        prompt_tokens="toy:prompt_tokens_total",
        generation_tokens="toy:generation_tokens_total",
        model_label="model",
    )
    profile_rules = ProfileRules(
        pd_fields=frozenset({"ib_device"}),
        pd_hint="toyserve moves KV by itself",
        offload_backends=("native",),
        dp_attention_hint="toyserve has no DP attention switch",
    )

    def signals(self, families: MetricFamilies) -> EngineSignals:
        return EngineSignals(
            queue=value(families, "toy:queue"),
            running=value(families, "toy:running"),
            kv_usage=value(families, "toy:kv"),
        )

    def parse_load(self, body: object) -> LoadReport:
        raise EngineError("toyserve has no load endpoint")

    def prefill_body(
        self, body: Mapping[str, Any], prefill: PDEndpoint, room: int | Sequence[int] | None = None
    ) -> Body:
        return {**body, "max_tokens": 1, "toy_keep_kv": True}

    def decode_body(
        self,
        body: Mapping[str, Any],
        prefill_response: Mapping[str, Any] | None,
        prefill: PDEndpoint,
        room: int | Sequence[int] | None = None,
    ) -> Body:
        return {**body, "toy_kv_from": f"{prefill.host}:{prefill.port}"}

    def pin_rank(self, rank: int) -> RankPin:
        return RankPin(headers={"x-toy-rank": str(rank)})

    def dp_ranks(self, model: ModelProfile, role: Role) -> int:
        return model.data_parallel_size

    def reported_dp_ranks(self, info: object) -> int | None:
        return None

    def launch_command(
        self, model: ModelProfile, *, role: Role, port: int, host: str = "0.0.0.0"
    ) -> list[str]:
        pd = ["--pd-role", role] if role != "both" else []
        return [
            "toyserve",
            "--model",
            model.model,
            "--host",
            host,
            "--port",
            str(port),
            *pd,
            *model.extra_args,
        ]

    def launch_env(self, model: ModelProfile, role: Role) -> dict[str, str]:
        return {"TOY_ROLE": role, **model.env}

    def pod_ip_env(self, model: ModelProfile, role: Role) -> tuple[str, ...]:
        return ("TOY_ADVERTISE",)

    def multinode_args(
        self, model: ModelProfile, *, nodes: int, gpus_per_node: int, leader: bool
    ) -> MultiNodeArgs:
        role = () if leader else ("--follower",)
        rendezvous = f"{LWS_LEADER_ADDRESS}:{DIST_PORT}"
        return MultiNodeArgs(("--nodes", str(nodes), "--node", LWS_WORKER_INDEX, "--meet", rendezvous, *role))

    def host_port_runs(self, model: ModelProfile, role: Role) -> dict[str, int]:
        return {"toy_rpc": model.data_parallel_size} if model.data_parallel_size > 1 else {}

    def host_port_args(self, ports: Mapping[str, int], host: str) -> list[str]:
        return ["--rpc-port", str(ports["toy_rpc"])] if "toy_rpc" in ports else []

    def host_port_env(self, ports: Mapping[str, int], host: str) -> dict[str, str]:
        return {"TOY_RPC_HOST": host} if "toy_rpc" in ports else {}


ADAPTER: EngineAdapter = ToyServe()


@pytest.fixture
def toyserve() -> Iterator[EngineAdapter]:
    register(ADAPTER)
    try:
        yield ADAPTER
    finally:
        unregister(NAME)


def write(tmp_path: Path, name: str, data: Mapping[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(dict(data), sort_keys=False))
    return path


def deployment(tmp_path: Path, **model: Any) -> Path:
    return write(
        tmp_path,
        "toy.yaml",
        {
            "name": "toy",
            "target": "kubernetes",
            "mode": "aggregated",
            "replicas": 2,
            "model": {"engine": NAME, "model": "toy/model", **model},
            "cluster": CLUSTER,
        },
    )


def test_a_profile_names_an_engine_once_it_is_registered(tmp_path: Path) -> None:
    path = write(tmp_path, "m.yaml", {"engine": NAME, "model": "toy/model"})
    with pytest.raises(ConfigError, match="engine: expected one of 'vllm', 'sglang', found 'toyserve'"):
        load_model(path)
    register(ADAPTER)
    try:
        assert load_model(path).engine == NAME
        typo = write(tmp_path, "typo.yaml", {"engine": "toyserv", "model": "m"})
        with pytest.raises(
            ConfigError, match="one of 'vllm', 'sglang', 'toyserve', found 'toyserv'; did you"
        ):
            load_model(typo)
        missing = write(tmp_path, "missing.yaml", {"model": "m"})
        with pytest.raises(ConfigError, match="'toyserve', found nothing"):
            load_model(missing)
    finally:
        unregister(NAME)
    with pytest.raises(ConfigError, match="found 'toyserve'"):
        load_model(path)


def test_its_profile_rules_are_its_adapters(tmp_path: Path, toyserve: EngineAdapter) -> None:
    def problems(**fields: Any) -> str:
        with pytest.raises(ConfigError) as caught:
            load_model(write(tmp_path, "m.yaml", {"engine": NAME, "model": "m", **fields}))
        return f"{caught.value.message} || {caught.value.hint}"

    assert load_model(
        write(tmp_path, "ok.yaml", {"engine": NAME, "model": "m", "pd": {"ib_device": "mlx5_0"}})
    )
    pd = problems(pd={"transfer_backend": "nixl"})
    assert "pd.transfer_backend: only meaningful for sglang, found it set with engine 'toyserve'" in pd
    assert "toyserve moves KV by itself" in pd
    assert "pd.kv_connector: only meaningful for vllm" in problems(pd={"kv_connector": "nixl"})
    dp = problems(dp_attention=True)
    assert "dp_attention: only meaningful for sglang" in dp and "toyserve has no DP attention switch" in dp
    off = problems(kv_offload={"backend": "hicache", "size_gib": 1})
    assert "kv_offload.backend: expected 'native' with engine 'toyserve', found 'hicache'" in off


def engine_containers(objs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for obj in objs:
        if obj["kind"] not in ("Deployment", "LeaderWorkerSet"):
            continue
        if obj["metadata"]["labels"][L.COMPONENT] != "engine":
            continue
        if obj["kind"] == "Deployment":
            templates = {"pod": obj["spec"]["template"]}
        else:
            lwt = obj["spec"]["leaderWorkerTemplate"]
            templates = {"leader": lwt["leaderTemplate"], "worker": lwt["workerTemplate"]}
        for which, tpl in templates.items():
            out.append((which, next(c for c in tpl["spec"]["containers"] if c["name"] == "engine")))
    return out


def test_it_renders_pods_alerts_and_dashboards_from_its_adapter(
    tmp_path: Path, toyserve: EngineAdapter
) -> None:
    objs = render(load_deployment(deployment(tmp_path)))
    assert validate_objects(objs, "1.31") == []
    ((which, engine),) = engine_containers(objs)
    assert which == "pod" and engine["image"] == "example.com/toyserve:1.2.0"
    argv = [*engine.get("command", []), *engine.get("args", [])]
    assert argv == ["toyserve", "--model", "toy/model", "--host", "0.0.0.0", "--port", "8000"]
    env = {e["name"]: e for e in engine["env"]}
    assert env["TOY_ADVERTISE"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["TOY_ROLE"]["value"] == "both"
    assert engine["readinessProbe"]["httpGet"]["path"] == "/ready"
    rules = yaml.safe_dump([o for o in objs if o["kind"] == "PrometheusRule"])
    assert "toy:ttft_seconds_bucket" in rules and "toy:kv" in rules
    assert 'le="1.0"' in rules  # the largest of its TTFT buckets under the 2 s objective
    boards = yaml.safe_dump(
        [o for o in objs if o["kind"] == "ConfigMap" and "dashboard" in o["metadata"]["name"]]
    )
    assert "toy:queue" in boards and "toy:prompt_tokens_total" in boards
    assert "vllm:" not in rules + boards and "sglang:" not in rules + boards


def test_a_replica_spanning_nodes_takes_its_multinode_flags(tmp_path: Path, toyserve: EngineAdapter) -> None:
    objs = render(load_deployment(deployment(tmp_path, tensor_parallel_size=16)))
    assert validate_objects(objs, "1.31") == []
    by_role = dict(engine_containers(objs))
    leader = [*by_role["leader"].get("command", []), *by_role["leader"].get("args", [])]
    worker = [*by_role["worker"].get("command", []), *by_role["worker"].get("args", [])]
    meet = ["--nodes", "2", "--node", "$(LWS_WORKER_INDEX)", "--meet", f"$(LWS_LEADER_ADDRESS):{DIST_PORT}"]
    assert leader[-6:] == meet and worker[-7:] == [*meet, "--follower"]
    assert {"name": "dist", "containerPort": DIST_PORT} in by_role["worker"]["ports"]


def test_its_flag_table_guards_the_image(tmp_path: Path, toyserve: EngineAdapter) -> None:
    path = deployment(tmp_path, image="example.com/toyserve:1.0.3", extra_args=["--pd-role", "x"])
    with pytest.raises(
        ConfigError, match=r"runs toyserve 1\.0\.3, which lacks --pd-role \(first in toyserve 1\.1\.0\)"
    ):
        render(load_deployment(path))


def test_the_local_target_gives_its_host_ports(tmp_path: Path, toyserve: EngineAdapter) -> None:
    path = write(
        tmp_path,
        "local.yaml",
        {
            "name": "toy-local",
            "target": "local",
            "mode": "aggregated",
            "replicas": 2,
            "model": {"engine": NAME, "model": "toy/model", "data_parallel_size": 2},
            "router": {"enabled": False},
            "local": {"base_port": 9100, "simulate": False},
        },
    )
    plan = build_plan(load_deployment(path), is_free=lambda port: True, run_dir=tmp_path, python="py")
    engines = [s for s in plan.specs if s.kind == "engine"]
    assert len(engines) == 2
    rpc = [s.ports["toy_rpc"] for s in engines]
    assert len(set(rpc)) == 2  # each engine its own run, side by side on one machine
    for spec, first in zip(engines, rpc, strict=True):
        assert spec.ports["toy_rpc.1"] == first + 1
        assert spec.argv[:2] == ("toyserve", "--model")
        assert spec.argv[-2:] == ("--rpc-port", str(first))
        assert spec.env["TOY_RPC_HOST"] == "127.0.0.1" and spec.env["TOY_ROLE"] == "both"
        assert spec.health_path == "/ready"


def test_router_discovery_and_doctor_take_it(tmp_path: Path, toyserve: EngineAdapter) -> None:
    router = load_router(
        write(tmp_path, "router.yaml", {"engine": NAME, "backends": [{"url": "http://a:1"}]})
    )
    assert router.engine == NAME and get_adapter(router.engine) is toyserve
    pod = {
        "metadata": {"labels": {L.ENGINE: NAME, L.DP_SIZE: "2"}},
        "status": {
            "podIP": "10.0.0.7",
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    found = targets_from_pod(pod, DiscoverySettings(namespace="n", selector="s"))
    assert found is not None and not found.problems
    assert [(b.engine, b.dp_rank) for b in found.backends] == [(NAME, 0), (NAME, 1)]
    assert get_adapter(NAME).pin_rank(1).headers == {"x-toy-rank": "1"}
    families = parse_metrics('toy:queue{model="m"} 3\ntoy:running 1\ntoy:kv 0.5\n')
    assert detect_engine(families) == NAME
    assert toyserve.signals(families) == EngineSignals(queue=3.0, running=1.0, kv_usage=0.5)


def test_registering_refuses_a_taken_name_and_shipped_engines_stay(toyserve: EngineAdapter) -> None:
    with pytest.raises(ConfigError, match="registered already"):
        register(toyserve)
    with pytest.raises(ConfigError, match="ships with infctl"):
        unregister("vllm")
    assert set(ENGINES) == {"vllm", "sglang", NAME}
