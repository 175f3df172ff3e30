from __future__ import annotations

import pytest

from infctl.tokenization.band import MARGIN, STARTING, RatioBand


def test_a_threshold_inside_the_band_is_not_decided() -> None:
    band = RatioBand()
    # 4,000 ASCII characters: 1,000 estimated tokens, exact anywhere in 500..2,000 at the start.
    assert band.bounds(4000, 1000) == (1000 * STARTING[0], 1000 * STARTING[1])
    assert not band.decides(4000, 1000, [512])
    assert not band.decides(4000, 1000, [1999])
    assert band.decides(4000, 1000, [499, 2000])  # every count in the band is on one side of each
    assert band.decides(4000, 1000, [])


def test_an_exact_count_inside_the_band_changes_nothing() -> None:
    band = RatioBand()
    assert not band.observe(4000, 1000, 1200)
    assert (band.seen, band.misses) == (1, 0)
    assert band.bounds(4000, 1000) == (500, 2000)


def test_a_miss_widens_only_its_script_class_with_a_margin() -> None:
    band = RatioBand()
    # A vocabulary without hanzi: three byte tokens a character, where the estimate counts one.
    assert band.observe(1000, 1000, 3000)
    assert band.misses == 1
    assert band.bounds(1000, 1000) == pytest.approx((500, 3000 * MARGIN))
    assert band.bounds(4000, 1000) == (500, 2000)  # ASCII prompts keep their band
    assert not band.decides(1000, 1000, [3500])  # now inside: the next such prompt is counted exactly
    assert not band.observe(1000, 1000, 3000)


def test_the_band_never_narrows_and_ignores_empty_prompts() -> None:
    band = RatioBand()
    band.observe(4000, 1000, 100)
    band.observe(4000, 1000, 1000)
    assert band.bounds(4000, 1000)[0] == pytest.approx(100 / MARGIN)
    assert not band.observe(0, 0, 5)
    assert band.seen == 2


def test_an_uncounted_prompt_is_scaled_by_its_class_ratio_over_every_count() -> None:
    band = RatioBand()
    assert band.scaled(4000, 1000) == 1000  # nothing seen: the estimate as it is
    band.observe(4000, 1000, 1200)
    band.observe(2000, 500, 700)  # ASCII: 1,900 exact over 1,500 estimated
    band.observe(1000, 1000, 1500)  # the other class keeps its own ratio
    assert band.scaled(8000, 2000) == round(2000 * 1900 / 1500)
    assert band.scaled(300, 300) == 450
