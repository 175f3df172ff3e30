"""Mooncake trace replay: equal hash ids give equal text (the prefix property), scaling, errors."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from infctl import tokens
from infctl.bench.workloads import TraceSpec, TraceWorkload, build_workload, read_trace
from infctl.bench.workloads.mooncake import sample_trace
from infctl.errors import ConfigError

TRACE = sample_trace()  # the public Mooncake trace shipped in data/


def write(tmp_path: Path, rows: list[object]) -> Path:
    p = tmp_path / "trace.jsonl"
    p.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return p


def line(ts: float, n_in: int, ids: list[int], n_out: int = 4) -> dict[str, object]:
    return {"timestamp": ts, "input_length": n_in, "output_length": n_out, "hash_ids": ids}


def workload(path: Path, api: str = "completions", **kw: object) -> TraceWorkload:
    w = build_workload(TraceSpec(path=path, block_size=8, **kw), api)  # type: ignore[arg-type]
    assert isinstance(w, TraceWorkload)
    return w


def test_equal_hash_ids_give_equal_text_and_different_ids_diverge(tmp_path: Path) -> None:
    path = write(
        tmp_path, [line(0, 24, [1, 2, 3]), line(5, 20, [1, 2, 4]), line(9, 19, [1, 2, 3]), line(9, 8, [7])]
    )
    reqs = list(workload(path).requests())
    words = [(r.prompt or "").split() for r in reqs]
    assert [len(w) for w in words] == [24, 20, 19, 8] == [r.input_tokens for r in reqs]
    assert words[0][:16] == words[1][:16] and words[0][16] != words[1][16]  # ids 3 vs 4 differ at block 3
    assert words[2] == words[0][:19]  # same ids, shorter last block: a prefix of the same text
    assert not set(words[3]) & set(words[0])
    assert [r.at_s for r in reqs] == [0.0, 0.005, 0.009, 0.009]


def test_scaling_keeps_blocks_aligned_and_time_compression(tmp_path: Path) -> None:
    path = write(tmp_path, [line(0, 16, [1, 2]), line(2000, 12, [1, 3], n_out=10)])
    w = workload(path, input_scale=0.5, output_scale=0.5, time_compression=4)
    a, b = list(w.requests())
    assert (a.input_tokens, b.input_tokens) == (8, 6)  # blocks of 4 tokens; last block 4 * 0.5 -> 2
    assert (a.prompt or "").split()[:4] == (b.prompt or "").split()[:4]
    assert b.max_tokens == 5 and b.at_s == 0.5
    chat = list(workload(path, api="chat").requests())
    assert [tokens.count_tokens(tokens.chat_prompt_text(r.messages or ())) for r in chat] == [16, 12]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps(line(-1, 8, [1])), "timestamp"),
        (json.dumps(line(0, 0, [])), "input_length"),
        (json.dumps({"timestamp": 0, "input_length": 8, "output_length": 1}), "hash_ids"),
        (json.dumps(line(0, 20, [1])), "needs 3 blocks"),
        # Non-finite timestamps parsed, sorted and left the replay waiting forever (issue 18).
        (
            '{"timestamp": NaN, "input_length": 8, "output_length": 1, "hash_ids": [1]}',
            "timestamp: .* found nan",
        ),
        (
            '{"timestamp": 1e999, "input_length": 8, "output_length": 1, "hash_ids": [1]}',
            "timestamp: .* found inf",
        ),
        ('{"timestamp": Infinity, "input_length": 8, "output_length": 1, "hash_ids": [1]}', "found inf"),
        ('{"timestamp": -1e999, "input_length": 8, "output_length": 1, "hash_ids": [1]}', "found -inf"),
        (json.dumps(line(1e300, 8, [1])), "timestamp: expected a finite number from 0 to 9.0072e"),
        (json.dumps(line(0, 10**12, [1])), "input_length: expected an integer from 1 to 10,000,000"),
        (json.dumps(line(0, 8, [1], n_out=0)), "output_length"),
        (json.dumps(line(0, 8, [1], n_out=10**9)), "output_length"),
        (json.dumps(line(0, 8.5, [1])), "input_length: .* found 8.5"),  # type: ignore[arg-type]
        (json.dumps(line(0, 8, [1.5])), r"hash_ids\[0\]: expected a 64-bit integer id, found 1.5"),  # type: ignore[list-item]
        (json.dumps(line(0, 16, [1, 2**64])), r"hash_ids\[1\]: .* found 18446744073709551616"),
        (json.dumps(line(0, 8, [True])), r"hash_ids\[0\]"),  # type: ignore[list-item]
        ("[" * 100_000, "not valid JSON"),  # a RecursionError traceback before
        ("1" * 5000, "not valid JSON"),
    ],
)
def test_bad_line_names_file_and_line(tmp_path: Path, bad: str, message: str) -> None:
    path = write(tmp_path, [line(0, 8, [1]), "", bad])
    with pytest.raises(ConfigError, match=message) as err:
        read_trace(path, 8)
    assert f"{path}:3:" in err.value.message


def test_invalid_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = json.dumps(line(0, 8, [1])).encode()
    path.write_bytes(good + b"\n" + good[:-1] + b', "note": "\xff"}\n')
    with pytest.raises(ConfigError) as err:  # a UnicodeDecodeError traceback before
        read_trace(path, 8)
    assert err.value.message == f"{path}:2: not UTF-8 text (byte 0xff at column {len(good) + 11})"


def test_lines_are_split_on_newlines_only(tmp_path: Path) -> None:
    note = {**line(0, 8, [1]), "note": "a\u2028b\x85c"}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(note, ensure_ascii=False) + "\n" + json.dumps(line(-1, 8, [1])) + "\n")
    with pytest.raises(ConfigError, match="timestamp") as err:
        read_trace(path, 8)
    assert f"{path}:2:" in err.value.message  # U+2028 and NEL split no line


@pytest.mark.timeout(60)
def test_a_device_is_refused_before_reading() -> None:
    with pytest.raises(ConfigError, match="/dev/zero: cannot read the trace: a device or socket"):
        read_trace(Path("/dev/zero"))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.jsonl: cannot read the trace") as err:
        read_trace(tmp_path / "nope.jsonl")
    assert err.value.hint == "check --trace PATH"


def test_real_trace_cache_reuse_equals_hash_id_reuse() -> None:
    """Chained block hashes of the synthesized prompts repeat exactly as often as the trace's hash ids."""
    entries = read_trace(TRACE)
    w = TraceWorkload(TraceSpec(path=TRACE, input_scale=1 / 32), "completions", tuple(entries), seed=3)
    seen_ids: set[int] = set()
    seen_hashes: set[int] = set()
    id_hits = hash_hits = blocks = 0
    for e, r in zip(entries, w.requests(), strict=True):
        full = w.input_tokens(e) // 16
        hashes = tokens.block_hashes(tokens.token_ids(r.prompt or ""), 16)
        assert len(hashes) == full
        for h_id, h in itertools.islice(zip(e.hash_ids, hashes, strict=False), full):
            blocks += 1
            id_hits += h_id in seen_ids
            hash_hits += h in seen_hashes
            seen_ids.add(h_id)
            seen_hashes.add(h)
    assert blocks > 10000
    assert hash_hits == id_hits and id_hits / blocks == pytest.approx(
        0.64, abs=0.03
    )  # REFERENCE.md section 4
