"""Images and flags agree: each adapter's table of first releases, and render refusing an image that lacks a
flag the profile makes it emit."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from infctl.config import load_deployment
from infctl.engines import ENGINES, get_adapter
from infctl.engines.versions import FlagNeed, check_image, image_version, lacking, needs, release
from infctl.errors import ConfigError
from infctl.manifests import render

ROOT = Path(__file__).resolve().parents[3]
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"
DEEPSEEK = ROOT / "profiles" / "deepseek-v3-group.yaml"
OFFLOAD = ["model.kv_offload.backend=native", "model.kv_offload.size_gib=40"]


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("vllm/vllm-openai:v0.32.0", (0, 32, 0)),
        ("lmsysorg/sglang:v0.5.17-cu130", (0, 5, 17)),
        ("lmsysorg/sglang:v0.5.6.post1", (0, 5, 6)),
        ("registry:5000/vllm/vllm-openai:v0.9.0.1", (0, 9, 0)),
        ("vllm/vllm-openai:v0.11.1@sha256:0123abcd", (0, 11, 1)),
        ("lmsysorg/sglang:latest", None),
        ("vllm/vllm-openai:nightly", None),
        ("vllm/vllm-openai:v0.12.0rc1", None),
        ("vllm/vllm-openai@sha256:0123abcd", None),
        ("registry:5000/vllm", None),
    ],
)
def test_the_release_an_image_runs_comes_from_its_tag(image: str, version: tuple[int, ...] | None) -> None:
    assert image_version(image) == version


def test_the_release_is_shown_as_the_engine_reports_it_else_the_tag() -> None:
    images = ("lmsysorg/sglang:v0.5.15", "vllm/vllm-openai:nightly", "vllm/vllm-openai@sha256:0123abcd")
    assert [release(i) for i in images] == ["0.5.15", "nightly", "unknown"]


def test_a_flag_entry_may_ask_for_a_value() -> None:
    table = {"--plain": (1, 0, 0), "--algo=NGRAM": (2, 0, 0), '--cfg="method":"mtp"': (3, 0, 0)}
    argv = ["serve", "--plain", "--algo", "EAGLE", '--cfg={"method":"mtp","n":1}']
    assert needs(argv, table) == [FlagNeed("--plain", (1, 0, 0)), FlagNeed('--cfg="method":"mtp"', (3, 0, 0))]
    assert [n.flag for n in needs(["--algo", "NGRAM"], table)] == ["--algo=NGRAM"]
    assert lacking(argv, table, (2, 5, 0)) == [FlagNeed('--cfg="method":"mtp"', (3, 0, 0))]
    assert FlagNeed("--algo=NGRAM", (2, 0, 0)).describe() == "--algo NGRAM"


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_each_default_image_accepts_every_flag_its_adapter_knows(name: str) -> None:
    adapter = get_adapter(name)
    version = image_version(adapter.default_image)
    assert version is not None, f"{adapter.default_image} is not pinned to a release"
    assert version >= adapter.oldest_checked
    assert all(version >= since for since in adapter.flag_versions.values())
    assert all(since > adapter.oldest_checked for since in adapter.flag_versions.values())


def test_the_vllm_default_is_the_release_the_slow_stage_proves() -> None:
    assert get_adapter("vllm").default_image == "vllm/vllm-openai:v0.32.0"


def test_render_refuses_an_image_without_the_offload_flags() -> None:
    old = load_deployment(QWEN, [*OFFLOAD, "model.image=vllm/vllm-openai:v0.11.0"])
    with pytest.raises(ConfigError) as err:
        render(old)
    message = err.value.message
    assert "vllm/vllm-openai:v0.11.0 runs vllm 0.11.0" in message
    assert "--kv-offloading-size (first in vllm 0.11.1)" in message
    assert "--kv-offloading-backend (first in vllm 0.11.1)" in message
    assert err.value.hint is not None and "vllm 0.11.1 or later" in err.value.hint
    # The first release that has them, and the same profile without offload on the old image, render.
    assert render(load_deployment(QWEN, [*OFFLOAD, "model.image=vllm/vllm-openai:v0.11.1"]))
    assert render(load_deployment(QWEN, ["model.image=vllm/vllm-openai:v0.11.0"]))


def test_render_refuses_a_value_the_image_lacks_and_images_older_than_the_table() -> None:
    ngram = ["model.speculative.method=ngram", "model.speculative.num_speculative_tokens=3"]
    with pytest.raises(ConfigError, match=r"--speculative-algorithm NGRAM \(first in sglang 0\.5\.3\)"):
        render(load_deployment(DEEPSEEK, [*ngram, "model.image=lmsysorg/sglang:v0.5.2"]))
    with pytest.raises(ConfigError, match=r"older than sglang 0\.4\.0, the oldest release"):
        render(load_deployment(DEEPSEEK, ["model.image=lmsysorg/sglang:v0.3.6"]))


def test_render_refuses_sglang_before_0_4_4_for_the_page_size_kv_events_bring() -> None:
    sglang = ["model.engine=sglang", "model.image=lmsysorg/sglang:v0.4.3.post4"]
    with pytest.raises(ConfigError) as err:
        render(load_deployment(QWEN, [*sglang, "model.kv_events.enabled=true"]))
    assert "--page-size (first in sglang 0.4.4)" in err.value.message
    assert "--kv-events-config (first in sglang 0.4.7)" in err.value.message
    # The flag alone, from extra_args: refused before 0.4.4, rendered from it on.
    page = ["model.kv_events.enabled=false", 'model.extra_args=["--page-size","32"]']
    with pytest.raises(ConfigError, match=r"lacks --page-size \(first in sglang 0\.4\.4\)$") as err:
        render(load_deployment(QWEN, [*sglang, *page]))
    assert err.value.hint is not None and "sglang 0.4.4 or later" in err.value.hint
    assert render(load_deployment(QWEN, [*sglang, *page, "model.image=lmsysorg/sglang:v0.4.4"]))


def test_an_image_whose_tag_names_no_release_is_not_checked() -> None:
    check_image(get_adapter("sglang"), "lmsysorg/sglang:latest", ["--hicache-storage-backend", "mooncake"])
    with pytest.raises(ConfigError, match=r"first in sglang 0\.4\.10"):
        check_image(get_adapter("sglang"), "lmsysorg/sglang:v0.4.9", ["--hicache-storage-backend", "x"])


def test_the_cli_names_the_flag_and_its_first_release() -> None:
    from infctl.cli.main import _register, app

    _register()
    argv = ["render", "-f", str(QWEN), "--set", "model.image=vllm/vllm-openai:v0.10.2"]
    for setting in OFFLOAD:
        argv += ["--set", setting]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    assert "--kv-offloading-size (first in vllm 0.11.1)" in " ".join(result.output.split())
