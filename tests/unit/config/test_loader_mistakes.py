"""Mistakes an operator makes with -f and --set: the error says what the file is and where to look."""

from __future__ import annotations

from pathlib import Path

import pytest

from infctl.config import load_deployment, load_profile, load_router
from infctl.errors import ConfigError

DEPLOYMENT = """\
name: demo
target: local
mode: aggregated
replicas: 2
model: models/m.yaml
"""


def error_of(call: object, *args: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        call(*args)  # type: ignore[operator]
    return info.value


@pytest.mark.parametrize(
    ("kind", "text", "key"),
    [
        ("model", "engine: vllm\nmodel: Qwen/Qwen3-8B\n", "engine"),
        (
            "cluster",
            "name: c\nswitch_label: network.topology.nvidia.com/block\ngpus_per_node: 8\n",
            "switch_label",
        ),
    ],
)
def test_a_model_or_cluster_profile_given_as_a_deployment_says_what_it_is(
    tmp_path: Path, kind: str, text: str, key: str
) -> None:
    """It used to be read as a deployment: every deployment key missing, `model: Qwen/Qwen3-8B` a path."""
    path = tmp_path / f"{kind}.yaml"
    path.write_text(text)
    err = error_of(load_deployment, path)
    assert err.message == f"{path}:1: a {kind} profile, not a deployment (it has `{key}:` and no `mode:`)"
    assert err.hint is not None and f"`{kind}:`" in err.hint and f"infctl validate -f {path}" in err.hint
    assert type(load_profile(path)).__name__.lower() == f"{kind}profile"  # validate still reads it alone


def test_a_missing_reference_folder_is_relative_to_the_profile_not_the_working_directory(
    tmp_path: Path,
) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(DEPLOYMENT)
    err = error_of(load_deployment, path)
    assert f"found no file at {tmp_path / 'models' / 'm.yaml'}" in err.message
    assert err.hint is not None and "working directory" not in err.hint
    assert f"relative to the folder of {path}" in err.hint


def test_a_key_that_only_a_set_flag_names_is_located_at_the_flag(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.yaml").write_text(
        "engine: vllm\nmodel: Qwen/Qwen3-8B\nsim: {profile: llama3-8b-h100}\n"
    )
    path = tmp_path / "d.yaml"
    path.write_text(DEPLOYMENT)
    err = error_of(load_deployment, path, ["nosuch.key=3"])
    assert err.message == "--set nosuch.key=3: nosuch: unknown key 'nosuch'"
    assert load_deployment(path, ["router.port=9000"]).router.port == 9000


def test_a_router_files_mistake_says_to_start_the_router_again_not_to_validate(tmp_path: Path) -> None:
    """`infctl validate` reads profiles, not router files: its hint sent the user to a wrong error."""
    path = tmp_path / "router.yaml"
    path.write_text("backends: [{url: http://127.0.0.1:9}]\nport: -1\n")
    err = error_of(load_router, path)
    assert err.hint == f"fix it, then check again with: infctl router -f {path}"


def test_an_unknown_key_is_never_told_to_be_a_key_already_written(tmp_path: Path) -> None:
    """`modle:` beside `mode:` was asked "did you mean 'mode'?", the key above it."""
    path = tmp_path / "d.yaml"
    path.write_text("name: demo\ntarget: local\nmode: aggregated\nreplicas: 2\nmodle:\n  engine: vllm\n")
    err = error_of(load_deployment, path)
    assert f"{path}:5: modle: unknown key 'modle'; did you mean 'model'?" in err.message
    alone = tmp_path / "m.yaml"
    alone.write_text("name: demo\ntarget: local\nmod: aggregated\nreplicas: 2\nmodel: {engine: vllm}\n")
    assert "did you mean 'mode'?" in error_of(load_deployment, alone).message  # not written: still offered
