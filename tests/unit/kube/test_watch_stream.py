import json

import pytest

from infctl.errors import KubeError
from infctl.kube.watch import Expired, WatchSettings, backoff_s, decode_event, split_lines, version_of


def test_backoff_doubles_from_the_minimum_up_to_the_cap() -> None:
    s = WatchSettings(backoff_min_s=0.5, backoff_max_s=4.0)
    assert [backoff_s(n, s) for n in range(6)] == [0.0, 0.5, 1.0, 2.0, 4.0, 4.0]


def test_lines_split_across_chunks_are_joined_and_blank_lines_dropped() -> None:
    lines, rest = split_lines(b"", b'{"a":1}\n\n{"b"')
    assert (lines, rest) == ([b'{"a":1}'], b'{"b"')
    lines, rest = split_lines(rest, b":2}\n")
    assert (lines, rest) == ([b'{"b":2}'], b"")


def event(kind: str, obj: dict[str, object]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


def test_events_decode_to_type_and_object_with_its_version() -> None:
    kind, obj = decode_event(event("MODIFIED", {"metadata": {"name": "p", "resourceVersion": "42"}}))
    assert kind == "MODIFIED" and version_of(obj) == "42"
    assert version_of({"metadata": {}}) is None


def test_a_410_error_event_means_list_again_and_other_errors_keep_their_status() -> None:
    with pytest.raises(Expired):
        decode_event(event("ERROR", {"kind": "Status", "code": 410, "message": "too old resource version"}))
    with pytest.raises(KubeError) as err:
        decode_event(event("ERROR", {"kind": "Status", "code": 500, "message": "etcd unavailable"}))
    assert err.value.status == 500 and "etcd unavailable" in err.value.message


def test_garbage_on_the_stream_is_a_kube_error_not_a_crash() -> None:
    with pytest.raises(KubeError):
        decode_event(b"<html>proxy error</html>")
    with pytest.raises(KubeError):
        decode_event(b'{"type": "ADDED"}')
