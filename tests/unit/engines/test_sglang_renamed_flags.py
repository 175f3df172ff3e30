"""SGLang flags spelled as the image's release expects: ``--dp-size N --enable-dp-attention`` before 0.5.22,
``--attn-dp-size N`` from it on (0.5.22/0.5.23 ``srt/arg_groups/fields/parallel.py``; the old spelling is
deprecated there, removal announced after 2026-12-31), in the engine's command line, the rendered manifests
and the local plan alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infctl.config import DeploymentProfile, ModelProfile, load_deployment
from infctl.engines import get_adapter, sglang_launch
from infctl.engines.versions import check_image
from infctl.local import build_plan
from infctl.manifests import render

ROOT = Path(__file__).resolve().parents[3]
DEEPSEEK = ROOT / "profiles" / "deepseek-v3-group.yaml"
OLD = ["--dp-size", "2", "--enable-dp-attention"]
NEW = ["--attn-dp-size", "2"]
DP_FLAGS = {"--dp-size", "--enable-dp-attention", "--attn-dp-size"}


def argv(image: str | None, **fields: Any) -> list[str]:
    model = ModelProfile(engine="sglang", model="m", data_parallel_size=2, image=image, **fields)
    return get_adapter("sglang").launch_command(model, role="both", port=30000)


def spelled(words: list[str] | tuple[str, ...]) -> list[str]:
    """The data-parallel words after ``--tp-size N``."""
    i, out = list(words).index("--tp-size") + 2, []
    while i < len(words) and (words[i] in DP_FLAGS or words[i].isdigit()):
        out.append(words[i])
        i += 1
    return out


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        (None, OLD),  # the pinned image, 0.5.15
        ("lmsysorg/sglang:v0.5.21", OLD),
        ("lmsysorg/sglang:v0.5.22", NEW),
        ("lmsysorg/sglang:v0.5.23-cu130", NEW),
        ("lmsysorg/sglang:v0.6.0", NEW),
        ("lmsysorg/sglang:latest", OLD),  # no release named: the spelling every release so far takes
    ],
)
def test_dp_attention_is_spelled_as_the_image_release_expects(image: str | None, expected: list[str]) -> None:
    words = argv(image, dp_attention=True, tensor_parallel_size=4)
    assert words[words.index("--tp-size") + 1] == "8"  # one TP group of tp * dp GPUs either way
    assert spelled(words) == expected
    # Whichever spelling, the image accepts it.
    check_image(get_adapter("sglang"), image or sglang_launch.IMAGE, words)


def test_plain_data_parallel_keeps_dp_size_on_every_release() -> None:
    for image in (None, "lmsysorg/sglang:v0.5.23"):
        assert spelled(argv(image)) == ["--dp-size", "2"]


def test_rendered_manifests_follow_the_image() -> None:
    def engine_args(image: str | None) -> list[list[str]]:
        sets = [] if image is None else [f"model.image={image}"]
        docs = render(load_deployment(DEEPSEEK, sets))
        return [
            c.get("command", []) + c.get("args", [])
            for d in docs
            if d["kind"] == "LeaderWorkerSet"
            for t in (d["spec"]["leaderWorkerTemplate"]["leaderTemplate"],)
            for c in t["spec"]["containers"]
        ]

    pinned, newer = engine_args(None), engine_args("lmsysorg/sglang:v0.5.23")
    assert pinned and all(spelled(a) == OLD for a in pinned)
    assert newer and all(spelled(a) == NEW for a in newer)
    assert not any("--enable-dp-attention" in a for a in newer)


def test_the_local_plan_follows_the_image() -> None:
    def plan_args(image: str) -> list[list[str]]:
        profile = DeploymentProfile.model_validate(
            {
                "name": "t", "target": "local", "mode": "aggregated", "replicas": 1,
                "model": {"engine": "sglang", "model": "org/m", "served_model_name": "m", "image": image,
                          "data_parallel_size": 2, "dp_attention": True},
                "local": {"base_port": 18000, "run_dir": "/tmp/runs", "simulate": False},
                "router": {"enabled": False},
            }
        )  # fmt: skip
        plan = build_plan(profile, is_free=lambda port: True, python="/usr/bin/python3")
        return [list(s.argv) for s in plan.specs]

    assert [spelled(a) for a in plan_args("lmsysorg/sglang:v0.5.21")] == [OLD]
    assert [spelled(a) for a in plan_args("lmsysorg/sglang:v0.5.22")] == [NEW]
