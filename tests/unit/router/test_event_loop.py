"""The router's event loop choice: uvloop when asked and installed, asyncio's own otherwise."""

from __future__ import annotations

import asyncio
import sys

import pytest

from infctl.errors import ConfigError
from infctl.router.server import loop_factory


def test_asyncio_means_the_default_loop() -> None:
    assert loop_factory("asyncio") is None


def test_without_uvloop_auto_falls_back_and_uvloop_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what an environment without it looks like to import
    assert loop_factory("auto") is None
    with pytest.raises(ConfigError, match="uvloop is not installed"):
        loop_factory("uvloop")


def test_with_uvloop_auto_uses_it() -> None:
    uvloop = pytest.importorskip("uvloop")
    factory = loop_factory("auto")
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
        assert loop.run_until_complete(asyncio.sleep(0, result=7)) == 7
    finally:
        loop.close()
