"""ShareGPT files: JSON arrays and JSON lines, length filters, output from replies, file:line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infctl.bench.workloads import LengthDist, ShareGPTSpec, build_workload
from infctl.errors import ConfigError


def conv(prompt_words: int, reply_words: int) -> dict[str, object]:
    return {
        "id": "x",
        "conversations": [
            {"from": "human", "value": " ".join(["ask"] * prompt_words)},
            {"from": "gpt", "value": "\n".join(["say"] * reply_words)},
        ],
    }


def test_array_filters_and_output_lengths(tmp_path: Path) -> None:
    p = tmp_path / "sg.json"
    p.write_text(
        json.dumps([conv(10, 20), conv(2, 20), conv(30, 5), {"conversations": []}, conv(2000, 5)], indent=1)
    )
    spec = ShareGPTSpec(path=p, shuffle=False)
    reqs = list(build_workload(spec, "completions").requests())
    assert [(r.input_tokens, r.max_tokens) for r in reqs] == [
        (10, 20),
        (30, 5),
    ]  # too short / too long skipped
    chat = list(build_workload(spec.model_copy(update={"output": LengthDist(mean=7)}), "chat").requests())
    assert [(r.input_tokens, r.max_tokens) for r in chat] == [(12, 7), (32, 7)]
    lines = p.read_text().splitlines()
    assert lines[reqs[1].group - 1].strip() == "{"  # group is the entry's line  # type: ignore[operator]


def test_jsonl_and_shuffle_is_seeded(tmp_path: Path) -> None:
    p = tmp_path / "sg.jsonl"
    p.write_text("\n".join(json.dumps(conv(5 + i, 6)) for i in range(20)) + "\n")
    spec = ShareGPTSpec(path=p)
    a = [r.input_tokens for r in build_workload(spec, "completions", seed=1).requests()]
    assert sorted(a) == list(range(5, 25)) and a != sorted(a)
    assert a == [r.input_tokens for r in build_workload(spec, "completions", seed=1).requests()]


def test_bad_entries_name_the_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_text(
        '[\n  {"conversations": [{"from": "human", "value": "a b c d"}]},\n  {"conversations": 3}\n]\n'
    )
    with pytest.raises(ConfigError, match=rf"{p}:3: expected an object"):
        build_workload(ShareGPTSpec(path=p), "completions")
    p.write_text('[\n {"conversations": [}\n]')
    with pytest.raises(ConfigError, match=rf"{p}:2:"):
        build_workload(ShareGPTSpec(path=p), "completions")
    p.write_text(json.dumps(conv(1, 1)) + "\n{oops\n")
    with pytest.raises(ConfigError, match=rf"{p}:2:"):
        build_workload(ShareGPTSpec(path=p), "completions")
    p.write_text(json.dumps([conv(1, 1)]))
    with pytest.raises(ConfigError, match="no usable conversation"):
        build_workload(ShareGPTSpec(path=p), "completions")


def test_missing_file_names_it_and_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.json: cannot read the dataset") as err:
        build_workload(ShareGPTSpec(path=tmp_path / "nope.json"), "chat")
    assert err.value.hint == "check --dataset PATH"
