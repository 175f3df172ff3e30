"""Host names and addresses: which ones only this machine reaches."""

from __future__ import annotations

import ipaddress

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
"""Names every machine resolves to its own loopback address (``/etc/hosts``)."""


def is_loopback(host: str, *, unspecified: bool = False) -> bool:
    """Whether ``host`` (a name, or an address with or without IPv6 brackets) is this machine's loopback;
    ``unspecified``: the bind-everything 0.0.0.0 / :: counts too (an address advertised to peers that no
    other machine can use)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_loopback or (unspecified and address.is_unspecified)
