import json
import shlex
from typing import Any

import pytest

from infctl.engines import get_adapter
from infctl.errors import ConfigError

model_module = pytest.importorskip("infctl.config.model")
ModelProfile = model_module.ModelProfile

VLLM = "vllm serve"
SGLANG = "python3 -m sglang.launch_server"


def profile(engine: str, **fields: Any) -> Any:
    return ModelProfile(engine=engine, model="org/model", **fields)


def command(engine: str, role: str = "both", port: int = 8000, **fields: Any) -> str:
    return shlex.join(get_adapter(engine).launch_command(profile(engine, **fields), role=role, port=port))


def flag_json(argv: list[str], flag: str) -> Any:
    return json.loads(argv[argv.index(flag) + 1])


# --- vLLM -------------------------------------------------------------------------------------------


def test_vllm_aggregated_defaults() -> None:
    assert command("vllm") == (
        f"{VLLM} org/model --served-model-name org/model --host 0.0.0.0 --port 8000"
        " --tensor-parallel-size 1 --data-parallel-size 1 --enable-prefix-caching"
        " --enable-prompt-tokens-details --enable-server-load-tracking"
    )


def test_vllm_wide_expert_parallel_without_prefix_caching() -> None:
    assert command(
        "vllm",
        port=9000,
        served_model_name="dsv3",
        tensor_parallel_size=1,
        data_parallel_size=16,
        expert_parallel=True,
        enable_eplb=True,
        max_model_len=32768,
        enable_prefix_caching=False,
        gpu_memory_utilization=0.85,
        extra_args=["--max-num-seqs", "512"],
    ) == (
        f"{VLLM} org/model --served-model-name dsv3 --host 0.0.0.0 --port 9000"
        " --tensor-parallel-size 1 --data-parallel-size 16 --enable-expert-parallel --enable-eplb"
        " --max-model-len 32768 --no-enable-prefix-caching --gpu-memory-utilization 0.85"
        " --enable-prompt-tokens-details --enable-server-load-tracking --max-num-seqs 512"
    )


@pytest.mark.parametrize(
    ("connector", "name"),
    [("nixl", "NixlConnector")],
)
@pytest.mark.parametrize(("role", "kv_role"), [("prefill", "kv_producer"), ("decode", "kv_consumer")])
def test_vllm_pd_roles_and_connectors(connector: str, name: str, role: str, kv_role: str) -> None:
    argv = get_adapter("vllm").launch_command(
        profile("vllm", pd={"kv_connector": connector}), role=role, port=1
    )
    assert flag_json(argv, "--kv-transfer-config") == {"kv_connector": name, "kv_role": kv_role}
    assert argv[argv.index("--kv-transfer-config") + 1] == json.dumps(
        {"kv_connector": name, "kv_role": kv_role}, separators=(",", ":")
    )


def test_vllm_aggregated_engine_ignores_pd_settings() -> None:
    argv = get_adapter("vllm").launch_command(
        profile("vllm", pd={"kv_connector": "nixl"}), role="both", port=1
    )
    assert "--kv-transfer-config" not in argv


def test_vllm_pd_role_without_a_pd_section_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="prefill engine needs the profile's pd section"):
        get_adapter("vllm").launch_command(profile("vllm"), role="prefill", port=1)


def test_vllm_everything_at_once() -> None:
    argv = get_adapter("vllm").launch_command(
        profile(
            "vllm",
            served_model_name="llama",
            pd={"kv_connector": "nixl", "ib_device": "mlx5_0"},
            kv_offload={"backend": "native", "size_gib": 8},
            kv_events={"port": 5560},
            speculative={"method": "mtp", "num_speculative_tokens": 2},
        ),
        role="decode",
        port=8200,
        host="127.0.0.1",
    )
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--kv-offloading-size") + 1] == "8"
    assert argv[argv.index("--kv-offloading-backend") + 1] == "native"
    assert flag_json(argv, "--kv-events-config") == {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": "tcp://*:5560",
        "topic": "kv@$POD_IP@llama",
    }
    assert flag_json(argv, "--speculative-config") == {"method": "mtp", "num_speculative_tokens": 2}
    assert argv[-2:] == ["--enable-prompt-tokens-details", "--enable-server-load-tracking"]


def test_vllm_disabled_kv_events_add_no_flag() -> None:
    argv = get_adapter("vllm").launch_command(
        profile("vllm", kv_events={"enabled": False}), role="both", port=1
    )
    assert "--kv-events-config" not in argv


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"method": "eagle", "num_speculative_tokens": 3, "draft_model": "org/eagle"},
            {"method": "eagle", "num_speculative_tokens": 3, "model": "org/eagle"},
        ),
        ({"method": "ngram", "num_speculative_tokens": 4}, {"method": "ngram", "num_speculative_tokens": 4}),
    ],
)
def test_vllm_speculative_config(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    argv = get_adapter("vllm").launch_command(profile("vllm", speculative=spec), role="both", port=1)
    assert flag_json(argv, "--speculative-config") == expected


def test_vllm_env_for_lmcache_offload_rdma_and_the_profile_env() -> None:
    adapter = get_adapter("vllm")
    model = profile(
        "vllm",
        kv_offload={"backend": "lmcache", "size_gib": 20.5},
        pd={"kv_connector": "nixl", "ib_device": "mlx5_0,mlx5_1"},
        env={"LMCACHE_CHUNK_SIZE": "512", "X": "1"},
    )
    assert adapter.launch_env(model, "prefill") == {
        "LMCACHE_CHUNK_SIZE": "512",  # the profile's own env wins
        "LMCACHE_LOCAL_CPU": "True",
        "LMCACHE_MAX_LOCAL_CPU_SIZE": "20.5",
        "UCX_NET_DEVICES": "mlx5_0,mlx5_1",
        "X": "1",
    }
    assert adapter.launch_env(profile("vllm"), "both") == {}
    # LMCache offload on an aggregated engine (no PD): its chunk size is set, no UCX device.
    assert adapter.launch_env(profile("vllm", kv_offload={"backend": "lmcache", "size_gib": 4}), "both") == {
        "LMCACHE_CHUNK_SIZE": "256",
        "LMCACHE_LOCAL_CPU": "True",
        "LMCACHE_MAX_LOCAL_CPU_SIZE": "4",
    }
    assert adapter.launch_env(profile("vllm", kv_offload={"backend": "native", "size_gib": 4}), "both") == {}


# --- SGLang -----------------------------------------------------------------------------------------


def test_sglang_aggregated_defaults() -> None:
    assert command("sglang", port=30000) == (
        f"{SGLANG} --model-path org/model --served-model-name org/model --host 0.0.0.0 --port 30000"
        " --tp-size 1 --dp-size 1 --enable-metrics --enable-cache-report"
    )


def test_sglang_prefill_with_dp_attention_and_expert_parallel() -> None:
    assert command(
        "sglang",
        role="prefill",
        port=30000,
        tensor_parallel_size=8,
        data_parallel_size=2,
        dp_attention=True,
        expert_parallel=True,
        enable_eplb=True,
        max_model_len=65536,
        gpu_memory_utilization=0.8,
        pd={"transfer_backend": "mooncake", "bootstrap_port": 9001, "ib_device": "mlx5_0"},
    ) == (
        f"{SGLANG} --model-path org/model --served-model-name org/model --host 0.0.0.0 --port 30000"
        " --tp-size 16 --dp-size 2 --enable-dp-attention --ep-size 16 --enable-eplb --context-length 65536"
        " --mem-fraction-static 0.8 --disaggregation-mode prefill --disaggregation-transfer-backend mooncake"
        " --disaggregation-bootstrap-port 9001 --disaggregation-ib-device mlx5_0"
        " --enable-metrics --enable-cache-report"
    )


def test_sglang_decode_has_no_bootstrap_port_and_plain_dp_keeps_tp() -> None:
    assert command(
        "sglang",
        role="decode",
        port=30001,
        tensor_parallel_size=4,
        data_parallel_size=2,
        expert_parallel=True,
        enable_prefix_caching=False,
        pd={"transfer_backend": "nixl"},
    ) == (
        f"{SGLANG} --model-path org/model --served-model-name org/model --host 0.0.0.0 --port 30001"
        " --tp-size 4 --dp-size 2 --ep-size 4 --disable-radix-cache --disaggregation-mode decode"
        " --disaggregation-transfer-backend nixl --enable-metrics --enable-cache-report"
    )


def test_sglang_pd_role_without_a_pd_section_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="decode engine needs the profile's pd section"):
        get_adapter("sglang").launch_command(profile("sglang"), role="decode", port=1)


def test_sglang_hierarchical_cache_and_kv_events() -> None:
    argv = get_adapter("sglang").launch_command(
        profile(
            "sglang",
            served_model_name="ds",
            kv_offload={
                "backend": "hicache",
                "size_gib": 64,
                "storage_backend": "mooncake",
                "pool": {"address": "master:50051"},
            },
            kv_events={},
        ),
        role="both",
        port=1,
    )
    joined = shlex.join(argv)
    assert "--enable-hierarchical-cache --hicache-size 64 --hicache-storage-backend mooncake" in joined
    assert flag_json(argv, "--kv-events-config") == {
        "publisher": "zmq",
        "endpoint": "tcp://*:5557",
        "topic": "kv@$POD_IP@ds",
    }
    # Its default page is 1 token, so it would publish an event per cached token.
    assert argv[argv.index("--page-size") + 1] == "16"


def test_sglang_page_size_comes_with_kv_events_and_yields_to_extra_args() -> None:
    adapter = get_adapter("sglang")
    plain = adapter.launch_command(profile("sglang"), role="both", port=1)
    assert "--page-size" not in plain
    chosen = adapter.launch_command(
        profile("sglang", kv_events={}, extra_args=["--page-size=64"]), role="both", port=1
    )
    assert "--page-size" not in chosen and chosen[-1] == "--page-size=64"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"method": "mtp", "num_speculative_tokens": 1},
            "--speculative-algorithm EAGLE --speculative-num-steps 1 --speculative-eagle-topk 1"
            " --speculative-num-draft-tokens 2",
        ),
        (
            {"method": "eagle", "num_speculative_tokens": 3, "draft_model": "org/eagle3"},
            "--speculative-algorithm EAGLE --speculative-draft-model-path org/eagle3"
            " --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
        ),
        (
            {"method": "ngram", "num_speculative_tokens": 7},
            "--speculative-algorithm NGRAM --speculative-num-draft-tokens 8",
        ),
    ],
)
def test_sglang_speculative_args(spec: dict[str, Any], expected: str) -> None:
    assert expected in command("sglang", speculative=spec)


def test_sglang_env_is_a_cheap_health_then_the_profile_env_and_extra_args_come_last() -> None:
    # SGLang 0.5.15/0.5.23: SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION defaults true, making /health a one-token
    # generation answered after >= 1 s (a startupProbe's default 1 s timeout never passes).
    adapter = get_adapter("sglang")
    model = profile("sglang", env={"SGLANG_X": "1"}, extra_args=["--page-size", "16"])
    health = {"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "false"}
    assert adapter.launch_env(model, "decode") == {**health, "SGLANG_X": "1"}
    assert adapter.launch_command(model, role="both", port=1)[-2:] == ["--page-size", "16"]
    mine = profile("sglang", env={"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "true"})
    assert adapter.launch_env(mine, "both") == {"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "true"}


# --- Host ports (what a local engine binds besides --port: infctl.local.engine_ports) --------------


def test_vllm_data_parallel_engines_need_their_own_rpc_port() -> None:
    from infctl.engines import vllm_launch

    assert vllm_launch.host_port_runs(profile("vllm")) == {}
    assert vllm_launch.host_port_runs(profile("vllm", data_parallel_size=2)) == {"dp_rpc": 1}
    assert vllm_launch.host_port_args({"dp_rpc": 18010, "kv_events": 1}, "127.0.0.1") == [
        "--data-parallel-rpc-port",
        "18010",
    ]
    assert vllm_launch.host_port_args({"kv_events": 1}, "127.0.0.1") == []
    # The user's own choice (either spelling) stands.
    for given in (["--data-parallel-rpc-port", "7"], ["-dpp=7"]):
        assert vllm_launch.host_port_runs(profile("vllm", data_parallel_size=2, extra_args=given)) == {}


def test_sglang_needs_a_dist_init_run_only_with_dp_attention() -> None:
    from infctl.engines import sglang_launch

    assert sglang_launch.host_port_runs(profile("sglang", data_parallel_size=2)) == {}
    # dist-init port + 0..6 and the handshake at + 13; more ranks than 7 widen the rust path's run.
    attention = profile("sglang", data_parallel_size=2, dp_attention=True)
    assert sglang_launch.host_port_runs(attention) == {"dist_init": 14}
    wide = profile("sglang", data_parallel_size=16, dp_attention=True)
    assert sglang_launch.host_port_runs(wide) == {"dist_init": 6 + 1 + 16}
    given = profile("sglang", data_parallel_size=2, dp_attention=True, extra_args=["--dist-init-addr", "h:1"])
    assert sglang_launch.host_port_runs(given) == {}
    assert sglang_launch.host_port_args({"dist_init": 18020}, "127.0.0.1") == [
        "--dist-init-addr",
        "127.0.0.1:18020",
    ]


def test_an_sglang_pd_prefill_needs_its_own_bootstrap_port() -> None:
    from infctl.engines import sglang_launch, vllm_launch

    pd = profile("sglang", pd={"transfer_backend": "mooncake"})
    assert sglang_launch.host_port_runs(pd, "prefill") == {"bootstrap": 1}
    assert sglang_launch.host_port_runs(pd, "decode") == sglang_launch.host_port_runs(pd) == {}
    assert sglang_launch.host_port_runs(profile("sglang"), "prefill") == {}  # no PD section: no bootstrap
    given = profile("sglang", pd={"transfer_backend": "mooncake"},
                    extra_args=["--disaggregation-bootstrap-port=9"])  # fmt: skip
    assert sglang_launch.host_port_runs(given, "prefill") == {}
    # Its flag comes from the model's pd.bootstrap_port (the planner gives each prefill its own).
    assert sglang_launch.host_port_args({"bootstrap": 18030}, "127.0.0.1") == []
    # vLLM has no bootstrap server; its NIXL side channel is another run (below).
    nixl = profile("vllm", pd={"kv_connector": "nixl"})
    assert "bootstrap" not in vllm_launch.host_port_runs(nixl, "prefill")


def test_a_vllm_nixl_pd_engine_needs_a_side_channel_port_per_rank() -> None:
    from infctl.engines import vllm_launch

    nixl = profile("vllm", pd={"kv_connector": "nixl"})
    # Prefill and decode both bind VLLM_NIXL_SIDE_CHANNEL_PORT + rank (5600 by default, every engine's).
    assert (
        vllm_launch.host_port_runs(nixl, "prefill")
        == vllm_launch.host_port_runs(nixl, "decode")
        == {"nixl_side_channel": 1}
    )
    assert vllm_launch.host_port_runs(nixl, "both") == {}  # no --kv-transfer-config, no connector
    wide = profile("vllm", pd={"kv_connector": "nixl"}, data_parallel_size=3)
    assert vllm_launch.host_port_runs(wide, "decode") == {"dp_rpc": 1, "nixl_side_channel": 3}
    assert vllm_launch.host_port_runs(profile("vllm"), "prefill") == {}  # no PD section: no connector
    given = profile("vllm", pd={"kv_connector": "nixl"}, env={"VLLM_NIXL_SIDE_CHANNEL_PORT": "7000"})
    assert vllm_launch.host_port_runs(given, "prefill") == {}
    assert vllm_launch.host_port_env({"nixl_side_channel": 18040, "nixl_side_channel.1": 18041}, "h") == {
        "VLLM_NIXL_SIDE_CHANNEL_PORT": "18040",
        "VLLM_NIXL_SIDE_CHANNEL_HOST": "h",
    }
    assert vllm_launch.host_port_env({"dp_rpc": 1}, "h") == {}
    assert vllm_launch.host_port_args({"nixl_side_channel": 18040}, "h") == []  # a variable, not a flag
