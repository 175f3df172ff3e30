"""Engine-timed ITL: windows of pure decode steps picked out of scraped counters; the per-point statistic."""

from __future__ import annotations

import pytest

from infctl.errors import ConfigError
from infctl.sim.calib_counters import decode_window, delta, prefill_seconds, weighted_median
from infctl.sim.calib_fit import ItlSample, TtftSample
from infctl.sim.calibrate import CalibrationSettings, median_itl, median_ttft, quantile

ITL = "vllm:inter_token_latency_seconds"
STEPS = "vllm:iteration_tokens_total"


class Engine:
    """Counters as an engine records them, one step at a time; ``snap()`` is a scrape."""

    def __init__(self) -> None:
        self.c = {f"{f}_{k}": 0.0 for f in (ITL, STEPS) for k in ("sum", "count")}

    def step(self, tokens: int, seconds: float, decoding: int) -> None:
        """One step of ``tokens`` tokens lasting ``seconds``, in which ``decoding`` streams got a token."""
        self.c[f"{STEPS}_sum"] += tokens
        self.c[f"{STEPS}_count"] += 1
        self.c[f"{ITL}_sum"] += seconds * decoding
        self.c[f"{ITL}_count"] += decoding

    def snap(self) -> dict[str, float]:
        return dict(self.c)


def test_only_intervals_of_pure_decode_steps_count() -> None:
    e = Engine()
    snaps = [e.snap()]
    e.step(tokens=2 * 512 + 2, seconds=0.080, decoding=0)  # both prompts' prefill: their first tokens
    e.step(tokens=2, seconds=0.002, decoding=2)
    snaps.append(e.snap())  # this interval holds the prefill: left out
    for _ in range(5):
        e.step(tokens=2, seconds=0.003, decoding=2)
    snaps.append(e.snap())
    e.step(tokens=2, seconds=0.005, decoding=2)
    e.step(tokens=1, seconds=0.001, decoding=1)  # one stream already finished
    snaps.append(e.snap())
    snaps.append(e.snap())  # nothing happened: no steps, ignored
    window = decode_window(snaps, batch=2)
    assert window is not None
    assert window.steps == 5
    assert window.seconds_per_step == pytest.approx(0.003)


def test_a_stalled_step_moves_the_pooled_mean_not_the_window() -> None:
    # 10 intervals of 10 decode steps of 5 ms; a 200 ms stall of the host lands in one token gap (the
    # simulator books event-loop lag over 50 ms into the next gap; a descheduled vLLM does the same).
    e = Engine()
    snaps = [e.snap()]
    for i in range(10):
        for k in range(10):
            e.step(tokens=2, seconds=0.205 if (i, k) == (3, 4) else 0.005, decoding=2)
        snaps.append(e.snap())
    window = decode_window(snaps, batch=2)
    assert window is not None and (window.steps, window.intervals) == (100, 10)
    assert window.seconds_per_step == pytest.approx(0.005)
    assert window.pooled_seconds == pytest.approx(0.007)  # +40%: what calibration used to read
    sample = ItlSample(2, 100, window.seconds_per_step, "engine", window.pooled_seconds)
    assert sample.stall_share == pytest.approx(0.4)


def test_the_window_is_the_step_weighted_median_interval() -> None:
    assert weighted_median([(3.0, 1), (1.0, 1), (2.0, 1)]) == 2.0
    assert weighted_median([(1.0, 1), (2.0, 1)]) == 1.5  # half falls between them
    assert weighted_median([(1.0, 1), (9.0, 5)]) == 9.0  # the interval with most steps outweighs
    e = Engine()
    snaps = [e.snap()]
    for seconds in (0.004, 0.006, 0.050):  # one slow interval of three: the middle one stands
        for _ in range(4):
            e.step(tokens=3, seconds=seconds, decoding=3)
        snaps.append(e.snap())
    window = decode_window(snaps, batch=3)
    assert window is not None and window.seconds_per_step == pytest.approx(0.006)


def test_too_few_pure_steps_give_no_window() -> None:
    e = Engine()
    snaps = [e.snap()]
    e.step(tokens=3 * 100 + 3, seconds=0.05, decoding=0)
    e.step(tokens=3, seconds=0.002, decoding=3)
    snaps.append(e.snap())
    for _ in range(3):
        e.step(tokens=3, seconds=0.002, decoding=3)
    snaps.append(e.snap())
    assert decode_window(snaps, batch=3) is None
    assert decode_window(snaps, batch=3, min_steps=3) is not None
    assert decode_window(snaps[:1], batch=3) is None


def test_delta_is_the_increase_between_scrapes() -> None:
    e = Engine()
    before = e.snap()
    e.step(tokens=4, seconds=0.01, decoding=4)
    d = delta(before, e.snap(), ITL)
    assert d.count == 4
    assert d.total == pytest.approx(0.04) and d.mean == pytest.approx(0.01)
    assert delta(before, before, ITL).mean is None


def test_quantile_interpolates_between_order_statistics() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert quantile(values, 0.5) == 3.0
    assert quantile(values, 0.0) == 1.0 and quantile(values, 1.0) == 5.0
    assert quantile(values, 0.25) == 2.0
    assert quantile([1.0, 2.0], 0.5) == 1.5
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_points_use_the_quantile_and_engine_timed_runs_only() -> None:
    runs = [ItlSample(4, 100.0, 0.010, "engine"), ItlSample(4, 110.0, 0.001, "client")]
    runs += [ItlSample(4, 100.0, s, "engine") for s in (0.020, 0.030)]
    (point,) = median_itl(runs, 0.5)
    assert (point.seconds, point.source) == (0.020, "engine")
    (client_only,) = median_itl([ItlSample(2, 10.0, 0.004, "client")])
    assert client_only.source == "client"
    ttft = median_ttft([TtftSample(16, s) for s in (0.010, 0.012, 0.030, 0.011)], 0.0)
    assert ttft == [TtftSample(16, 0.010)]


def test_the_quantile_setting_is_checked() -> None:
    with pytest.raises(ConfigError, match="quantile"):
        CalibrationSettings(url="http://x", quantile=1.5)


def test_a_lone_requests_prefill_time_is_read_only_when_exactly_one_finished() -> None:
    fam = "vllm:request_prefill_time_seconds"
    before = {f"{fam}_sum": 1.0, f"{fam}_count": 3.0}
    assert prefill_seconds(before, {f"{fam}_sum": 1.25, f"{fam}_count": 4.0}) == pytest.approx(0.25)
    assert prefill_seconds(before, before) is None  # not recorded yet
    assert prefill_seconds(before, {f"{fam}_sum": 1.5, f"{fam}_count": 5.0}) is None  # someone else's too


def test_ttft_points_carry_the_engines_prefill_quantile_and_the_overhead() -> None:
    runs = [TtftSample(16, t, 0, p) for t, p in ((0.020, 0.004), (0.018, 0.005), (0.040, 0.006))]
    (point,) = median_ttft(runs, 0.5)
    assert (point.seconds, point.engine_prefill_s) == (0.020, 0.005)
    assert point.overhead_s == pytest.approx(0.015)
    # One request the engine did not time: the point falls back to the client's view alone.
    (mixed,) = median_ttft([*runs, TtftSample(16, 0.019)], 0.5)
    assert mixed.engine_prefill_s is None and mixed.overhead_s is None
