"""infctl.hosts: the one loopback check the router's admin warning and the doctor share."""

from __future__ import annotations

import pytest

from infctl.hosts import is_loopback

LOOPBACKS = ["localhost", "LOCALHOST", "ip6-localhost", "127.0.0.1", "127.3.4.5", "::1", "[::1]"]


@pytest.mark.parametrize("host", LOOPBACKS)
def test_loopback_names_and_addresses(host: str) -> None:
    assert is_loopback(host) and is_loopback(host, unspecified=True)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]"])
def test_unspecified_counts_only_when_asked(host: str) -> None:
    assert not is_loopback(host)
    assert is_loopback(host, unspecified=True)


@pytest.mark.parametrize("host", ["10.0.0.7", "fd00::1", "engine-0.svc", ""])
def test_other_hosts_are_not(host: str) -> None:
    assert not is_loopback(host, unspecified=True)
