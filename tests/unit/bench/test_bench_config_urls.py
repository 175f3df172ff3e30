"""BenchConfig's URLs follow the one rule (``infctl.config.router.check_engine_url``) the CLI's URL flags
follow, for library callers (the demo, scenarios) too: a scheme-only check of its own let a URL without a
host or with a port past 65535 through, to fail as a connection after the workload was built."""

from __future__ import annotations

from typing import Any

import pytest

from infctl.bench import validate_config
from infctl.errors import ConfigError

BASE: dict[str, Any] = {"url": "http://127.0.0.1:8000", "load": {"stages": [{"rate": 1, "num_requests": 1}]}}


def test_good_urls_pass() -> None:
    cfg = validate_config({**BASE, "engine_urls": ["https://e0:8100", "http://[::1]:8101"]})
    assert cfg.url == "http://127.0.0.1:8000" and len(cfg.engine_urls) == 2


@pytest.mark.parametrize("bad", ["127.0.0.1:8000", "http://:8000", "http://h:99999", "ftp://h:1"])
def test_a_bad_url_is_bad_input_naming_its_key(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"^url: ") as err:
        validate_config({**BASE, "url": bad})
    assert bad in err.value.message
    with pytest.raises(ConfigError, match=r"^engine_urls\[1\]: "):
        validate_config({**BASE, "engine_urls": ["http://e0:8100", bad]})
