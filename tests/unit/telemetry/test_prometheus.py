import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infctl.errors import MetricsError
from infctl.telemetry.prometheus import (
    Sample,
    histogram_buckets,
    histogram_quantile,
    label_values,
    mean_value,
    parse_metrics,
    value,
)

FIXTURES = Path(__file__).parents[1] / "engines" / "fixtures"
VLLM_TEXT = (FIXTURES / "vllm_v0_11.prom").read_text()
SGLANG_TEXT = (FIXTURES / "sglang_v0_5.prom").read_text()


def test_comments_help_type_and_blank_lines_are_skipped() -> None:
    text = "# HELP a An a.\n# TYPE a gauge\n\na 1\n   \n# just a comment\n  # indented comment\nb 2\n"
    assert parse_metrics(text) == {"a": [Sample({}, 1.0)], "b": [Sample({}, 2.0)]}


def test_labels_with_escaped_quotes_backslashes_newlines_commas_and_braces() -> None:
    text = 'm{path="C:\\\\dir\\\\x",msg="say \\"hi\\", then}",nl="a\\nb",empty=""} 3\n'
    [sample] = parse_metrics(text)["m"]
    assert sample.labels == {"path": "C:\\dir\\x", "msg": 'say "hi", then}', "nl": "a\nb", "empty": ""}
    assert sample.value == 3.0


def test_trailing_comma_spaces_and_empty_braces() -> None:
    text = 'a{x="1", y = "2" ,} 1\nb{} 2\nc\t{z="3"}\t4\n'
    fams = parse_metrics(text)
    assert fams["a"][0].labels == {"x": "1", "y": "2"}
    assert fams["b"] == [Sample({}, 2.0)]
    assert fams["c"] == [Sample({"z": "3"}, 4.0)]


def test_special_values_and_exponents() -> None:
    fams = parse_metrics("a +Inf\nb -Inf\nc NaN\nd 1.5e+06\ne -2E-3\n")
    assert fams["a"][0].value == math.inf
    assert fams["b"][0].value == -math.inf
    assert math.isnan(fams["c"][0].value)
    assert fams["d"][0].value == 1.5e6
    assert fams["e"][0].value == -0.002


def test_timestamps_are_accepted_and_dropped() -> None:
    fams = parse_metrics('a{x="1"} 7 1712345678901\nb 8 -5\n')
    assert fams == {"a": [Sample({"x": "1"}, 7.0)], "b": [Sample({}, 8.0)]}


def test_crlf_line_endings_and_no_final_newline() -> None:
    assert parse_metrics('# TYPE a gauge\r\na 1\r\n\r\nb{x="y"} 2') == {
        "a": [Sample({}, 1.0)],
        "b": [Sample({"x": "y"}, 2.0)],
    }


def test_histogram_samples_keep_their_suffixed_names() -> None:
    text = (
        "# TYPE h histogram\n"
        'h_bucket{le="0.1"} 1\nh_bucket{le="1.0"} 3\nh_bucket{le="+Inf"} 4\nh_sum 2.5\nh_count 4\n'
    )
    fams = parse_metrics(text)
    assert [s.labels["le"] for s in fams["h_bucket"]] == ["0.1", "1.0", "+Inf"]
    assert value(fams, "h_count") == 4.0 and value(fams, "h_sum") == 2.5


@pytest.mark.parametrize(
    "line",
    [
        "bad{x=1} 2",
        "bad notanumber",
        "bad",
        'bad{x="1"',
        'bad{x="1"}2',
        "{x} 1",
        "=oops 1",
        'bad{x="1" y="2"} 1',
    ],
)
def test_malformed_lines_raise_with_line_number(line: str) -> None:
    with pytest.raises(MetricsError) as err:
        parse_metrics(f"# HELP ok fine\nok 1\n{line}\n")
    assert "line 3" in err.value.message
    assert err.value.hint


def test_a_malformed_wanted_line_raises_and_names_its_line() -> None:
    with pytest.raises(MetricsError, match="line 2"):
        parse_metrics('a 1\nb{x="1"} nope\n', wanted={"b"})


def test_unwanted_lines_are_not_examined() -> None:
    # The filter's point: unwanted lines cost nothing, so their faults go unseen too.
    assert parse_metrics("junk!! here\na 1\n", wanted={"a"}) == {"a": [Sample({}, 1.0)]}


def test_filter_matches_exact_names_not_prefixes() -> None:
    text = 'w 1\nw_by_reason{reason="capacity"} 2\nwx 3\nw_total 4\n'
    assert parse_metrics(text, wanted={"w"}) == {"w": [Sample({}, 1.0)]}


def test_filter_selects_histogram_suffixes_from_the_family_name() -> None:
    text = 'h_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3\nh_count 2\nh_created 9\nother 1\n'
    fams = parse_metrics(text, wanted={"h"})
    assert sorted(fams) == ["h_bucket", "h_count", "h_sum"]


def test_filter_finds_the_first_line_and_tolerates_empty_wanted() -> None:
    assert parse_metrics("a 1\nb 2", wanted=["a"]) == {"a": [Sample({}, 1.0)]}
    assert parse_metrics("a 1\n", wanted=[]) == {}


def _selected(name: str, wanted: set[str]) -> bool:
    if name in wanted:
        return True
    return any(name.endswith(sfx) and name[: -len(sfx)] in wanted for sfx in ("_bucket", "_sum", "_count"))


@pytest.mark.parametrize("text", [VLLM_TEXT, SGLANG_TEXT], ids=["vllm", "sglang"])
def test_filtered_parse_equals_unfiltered_restricted_to_wanted(text: str) -> None:
    full = parse_metrics(text)
    names = sorted(full)
    for wanted in (
        set(names[::3]),
        set(names[1::4]),
        {"vllm:time_to_first_token_seconds", "sglang:token_usage"},
    ):
        expected = {k: v for k, v in full.items() if _selected(k, wanted)}
        assert parse_metrics(text, wanted) == expected


@pytest.mark.parametrize("text", [VLLM_TEXT, SGLANG_TEXT], ids=["vllm", "sglang"])
def test_fixtures_parse_as_prometheus_client_parses_them(text: str) -> None:
    parser = pytest.importorskip("prometheus_client.parser")
    oracle: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            oracle.setdefault(s.name, []).append((dict(s.labels), s.value))
    ours = {k: [(dict(s.labels), s.value) for s in v] for k, v in parse_metrics(text).items()}
    assert ours == oracle


def test_value_sums_over_label_sets_ignoring_nan_and_defaults_when_absent() -> None:
    fams = parse_metrics('q{e="0"} 2\nq{e="1"} 3\nq{e="2"} NaN\nn NaN\n')
    assert value(fams, "q") == 5.0
    assert value(fams, "missing", -1.0) == -1.0
    assert value(fams, "n", 7.0) == 7.0
    assert mean_value(fams, "q") == 2.5
    assert mean_value(fams, "missing", 0.5) == 0.5


def test_label_values_are_distinct_and_sorted() -> None:
    fams = parse_metrics('a{m="y"} 1\na{m="x"} 1\nb{m="y"} 1\nc 1\n')
    assert label_values(fams, ["a", "b", "c", "d"], "m") == ("x", "y")


def test_histogram_quantile_interpolates_like_promql() -> None:
    text = (
        'h_bucket{e="0",le="0.1"} 10\nh_bucket{e="0",le="0.5"} 30\nh_bucket{e="0",le="+Inf"} 40\n'
        'h_bucket{e="1",le="0.1"} 10\nh_bucket{e="1",le="0.5"} 10\nh_bucket{e="1",le="+Inf"} 10\n'
    )
    fams = parse_metrics(text)
    assert histogram_buckets(fams, "h") == [(0.1, 20.0), (0.5, 40.0), (math.inf, 50.0)]
    # rank 25 of 50 lies a quarter of the way through the (0.1, 0.5] bucket.
    assert histogram_quantile(0.5, fams, "h") == pytest.approx(0.2)
    assert histogram_quantile(0.1, fams, "h") == pytest.approx(0.025)
    assert histogram_quantile(0.99, fams, "h") == 0.5  # in +Inf: the highest finite bound
    assert histogram_quantile(0.5, fams, "h", {"e": "1"}) == pytest.approx(0.05)
    assert histogram_quantile(0.5, fams, "missing") is None


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


_names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,20}", fullmatch=True)
_label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,10}", fullmatch=True)
_label_values = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_values = st.floats(allow_nan=False) | st.sampled_from([math.inf, -math.inf])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            _names,
            st.dictionaries(_label_names, _label_values, max_size=4),
            _values,
            st.none() | st.integers(-(2**40), 2**40),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_round_trip_of_generated_samples(
    samples: list[tuple[str, dict[str, str], float, int | None]],
) -> None:
    lines = []
    for name, labels, v, ts in samples:
        block = "{" + ",".join(f'{k}="{_escape(x)}"' for k, x in labels.items()) + "}" if labels else ""
        lines.append(f"{name}{block} {v!r}" + (f" {ts}" if ts is not None else ""))
    text = "# HELP generated\n" + "\n".join(lines) + "\n"
    expected: dict[str, list[Sample]] = {}
    for name, labels, v, _ in samples:
        expected.setdefault(name, []).append(Sample(labels, v))
    assert parse_metrics(text) == expected
    wanted = {samples[0][0]}
    assert parse_metrics(text, wanted) == {k: v for k, v in expected.items() if _selected(k, wanted)}
