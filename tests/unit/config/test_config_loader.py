"""Loading YAML profiles: file:line + key path + expected/found in every error, references, --set."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from infctl.config import apply_overrides, load_cluster, load_deployment, load_model
from infctl.errors import ConfigError

GOOD_MODEL = """\
engine: vllm
model: Qwen/Qwen3-8B
"""

GOOD = """\
name: demo
target: local
mode: group
groups: 2
group:
  prefill: 1
  decode: 2
model:
  engine: vllm
  model: Qwen/Qwen3-8B
  pd: {kv_connector: nixl}
  sim: {profile: llama3-8b-h100}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def error_of(path: Path, overrides: list[str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_deployment(path, overrides or [])
    return info.value


def test_good_profile_loads(tmp_path: Path) -> None:
    profile = load_deployment(write(tmp_path, "d.yaml", GOOD))
    assert profile.replicas_by_role() == {"prefill": 2, "decode": 4}


def test_wrong_value_names_file_line_path_expected_and_found(tmp_path: Path) -> None:
    path = write(tmp_path, "x.yaml", GOOD.replace("prefill: 1", "prefill: 0"))
    err = error_of(path)
    assert err.message == f"{path}:6: group.prefill: expected an integer >= 1, found 0"
    assert err.exit_code == 2 and err.hint


def test_wrong_type(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "x.yaml", GOOD.replace("groups: 2", "groups: two")))
    assert err.message.endswith("x.yaml:4: groups: expected an integer >= 1, found 'two'")


def test_unknown_key_suggests_the_closest(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "x.yaml", GOOD.replace("  decode: 2", "  decod: 2")))
    assert "x.yaml:7: group.decod: unknown key 'decod'; did you mean 'decode'?" in err.message
    assert "x.yaml:5: group.decode: expected an integer >= 1, found nothing" in err.message


def test_single_unknown_key_hints_the_valid_keys(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "x.yaml", GOOD.replace("groups: 2", "grups: 2")))
    assert err.message.endswith("x.yaml:4: grups: unknown key 'grups'; did you mean 'groups'?")
    assert err.hint is not None and "groups" in err.hint and "pools" in err.hint


def test_bad_literal_suggests_the_closest_choice(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "x.yaml", GOOD.replace("engine: vllm", "engine: vlm")))
    assert "x.yaml:9: model.engine: expected one of 'vllm', 'sglang', found 'vlm'; did you mean 'vllm'?" in (
        err.message
    )


def test_missing_required_key_points_at_its_parent(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "x.yaml", GOOD.replace("  model: Qwen/Qwen3-8B\n", "")))
    assert err.message.endswith(
        "x.yaml:8: model.model: expected a non-empty string, found nothing (the key is required)"
    )


def test_mode_and_layout_mismatch(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "x.yaml", GOOD.replace("mode: group", "mode: aggregated")))
    assert "x.yaml:4: groups: only used in group mode, found it with mode 'aggregated'" in err.message
    assert "x.yaml:5: group: only used in group mode" in err.message


def test_missing_layout(tmp_path: Path) -> None:
    err = error_of(
        write(tmp_path, "x.yaml", GOOD.replace("mode: group", "mode: pool").replace("groups: 2\n", ""))
    )
    assert "x.yaml:4: group: only used in group mode" in err.message
    assert (
        "x.yaml:3: pools: expected a mapping with prefill and decode counts in pool mode, found nothing"
        in (err.message)
    )


def test_list_items_are_located(tmp_path: Path) -> None:
    text = """\
    name: c
    switch_label: network.topology.nvidia.com/block
    gpus_per_node: 8
    tolerations:
      - {key: a, operator: Exists}
      - key: b
        effect: NoSchedul
    """
    with pytest.raises(ConfigError) as info:
        load_cluster(write(tmp_path, "c.yaml", text))
    assert "c.yaml:7: tolerations[1].effect: expected one of 'NoSchedule'" in info.value.message
    assert "found 'NoSchedul'; did you mean 'NoSchedule'?" in info.value.message


def test_many_problems_are_all_reported_up_to_ten(tmp_path: Path) -> None:
    text = "name: x\nmode: aggregated\nmodel: {engine: vllm, model: m}\n" + "".join(
        f"bogus{i}: 1\n" for i in range(12)
    )
    err = error_of(write(tmp_path, "x.yaml", text))
    assert err.message.startswith(f"{tmp_path / 'x.yaml'}: 12 problems\n")
    assert err.message.count("unknown key") == 10 and err.message.endswith("... and 2 more")


def test_yaml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "x.yaml", "name: x\nmode: [group\n  b: 1\n"))
    assert err.message.startswith(f"{tmp_path / 'x.yaml'}:3:4: YAML syntax error:")


def test_duplicate_keys_are_errors(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "x.yaml", GOOD + "groups: 3\n"))
    assert "x.yaml:13:1: YAML syntax error: found duplicate key 'groups' (first at line 4)" in err.message


def test_missing_file(tmp_path: Path) -> None:
    write(tmp_path, "other.yaml", GOOD)
    err = error_of(tmp_path / "nope.yaml")
    assert err.message == f"{tmp_path / 'nope.yaml'}: file not found"
    assert err.hint is not None and "other.yaml" in err.hint


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    assert "found a list" in error_of(write(tmp_path, "x.yaml", "- a\n")).message
    assert "empty" in error_of(write(tmp_path, "y.yaml", "# nothing\n")).message


def test_referenced_model_is_read_relative_to_the_file(tmp_path: Path) -> None:
    write(tmp_path, "models/m.yaml", GOOD_MODEL + "pd: {}\nsim: {profile: llama3-8b-h100}\n")
    text = GOOD.split("model:\n")[0] + "model: models/m.yaml\n"
    profile = load_deployment(write(tmp_path, "deploy/../d.yaml", text))
    assert profile.model.model == "Qwen/Qwen3-8B"


def test_errors_in_a_referenced_file_point_into_it(tmp_path: Path) -> None:
    write(
        tmp_path, "models/m.yaml", GOOD_MODEL + "pd: {}\nsim: {profile: llama3-8b-h100}\ntensor_parallel: 2\n"
    )
    text = GOOD.split("model:\n")[0] + "model: models/m.yaml\n"
    err = error_of(write(tmp_path, "d.yaml", text))
    assert err.message.startswith(f"{tmp_path / 'models' / 'm.yaml'}:5: model.tensor_parallel: unknown key")
    assert "did you mean 'tensor_parallel_size'?" in err.message


def test_missing_referenced_file(tmp_path: Path) -> None:
    write(tmp_path, "clusters/h100.yaml", "name: c\n")
    text = GOOD + "cluster: clusters/h200.yaml\n"
    err = error_of(write(tmp_path, "d.yaml", text))
    assert err.message.startswith(f"{tmp_path / 'd.yaml'}:13: cluster: expected a cluster profile")
    assert f"found no file at {tmp_path / 'clusters' / 'h200.yaml'}" in err.message
    assert err.hint is not None and "h100.yaml" in err.hint


def test_set_overrides_values_and_reaches_into_references(tmp_path: Path) -> None:
    write(tmp_path, "models/m.yaml", GOOD_MODEL + "pd: {}\nsim: {profile: llama3-8b-h100}\n")
    path = write(tmp_path, "d.yaml", GOOD.split("model:\n")[0] + "model: models/m.yaml\n")
    profile = load_deployment(
        path, ["group.decode=3", "model.tensor_parallel_size=2", "model.extra_args=[--a]"]
    )
    assert profile.replicas_by_role() == {"prefill": 2, "decode": 6}
    assert profile.model.tensor_parallel_size == 2 and profile.model.extra_args == ["--a"]


def test_set_null_removes_a_key_so_the_mode_can_change(tmp_path: Path) -> None:
    path = write(tmp_path, "d.yaml", GOOD)
    profile = load_deployment(path, ["mode=aggregated", "groups=", "group=null", "replicas=3"])
    assert profile.replicas_by_role() == {"both": 3}


def test_errors_in_overridden_values_name_the_flag(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "d.yaml", GOOD), ["group.decode=0"])
    assert err.message == "--set group.decode=0: group.decode: expected an integer >= 1, found 0"


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        ("group.decode", "expected KEY.PATH=VALUE"),
        ("a..b=1", "expected a key path"),
        ("group.decode.x=1", "cannot set group.decode.x"),
        ("tolerations[0]=x", "cannot set tolerations[0]"),
    ],
)
def test_malformed_overrides(expr: str, text: str) -> None:
    with pytest.raises(ConfigError) as info:
        apply_overrides({"group": {"decode": 2}}, [expr])
    assert info.value.message.startswith(f"--set {expr}: {text}")


def test_apply_overrides_is_pure_and_parses_yaml_scalars() -> None:
    raw = {"group": {"decode": 2}, "model": {"env": {}}, "cluster": {"tolerations": [{"key": "a"}]}}
    out = apply_overrides(
        raw,
        [
            "group.decode=3",
            "model.enable_prefix_caching=false",
            "model.kv_offload.size_gib=1.5",
            "model.env.NCCL_DEBUG=INFO",
            "cluster.tolerations[0].effect=NoSchedule",
            "model.image=repo/x:v1",
        ],
    )
    assert raw["group"]["decode"] == 2
    assert out["group"]["decode"] == 3
    assert out["model"] == {
        "env": {"NCCL_DEBUG": "INFO"},
        "enable_prefix_caching": False,
        "kv_offload": {"size_gib": 1.5},
        "image": "repo/x:v1",
    }
    assert out["cluster"]["tolerations"][0] == {"key": "a", "effect": "NoSchedule"}


def test_load_model_and_cluster_directly(tmp_path: Path) -> None:
    assert load_model(write(tmp_path, "m.yaml", GOOD_MODEL)).engine == "vllm"
    with pytest.raises(ConfigError) as info:
        load_model(write(tmp_path, "n.yaml", GOOD_MODEL + "kv_offload: {backend: hicache, size_gib: 4}\n"))
    assert info.value.message.endswith(
        "n.yaml:3: kv_offload.backend: expected 'native' or 'lmcache' with engine 'vllm', found 'hicache'"
    )
