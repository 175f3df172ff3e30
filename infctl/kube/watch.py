"""Listing and watching pods by label selector (the router's Kubernetes discovery), as the API means watches.

One list gives the whole set and the collection's ``resourceVersion``; a watch from that version then streams
every change. A watch request holds for ``timeoutSeconds`` (minutes) and, when the server ends it, the next
one resumes from the last version seen (an event's, or a BOOKMARK's when the server sends them), so nothing
is re-listed. Only a 410 Gone (the version fell out of the server's history) or a refusal from the API server
brings a fresh list; connection failures resume the watch after a capped exponential backoff.

Blocking, like the rest of this package: :meth:`PodWatch.run` runs in a thread, and :meth:`PodWatch.stop`
(from any thread) shuts the open response's socket down, so the thread returns at once instead of when the
server's timeout would have ended the request.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import urllib3

from infctl.errors import KubeError
from infctl.kube.client import JSON, KubeClient, api_error

Pod = dict[str, Any]
GONE = 410


@dataclass(frozen=True)
class WatchSettings:
    """How a :class:`PodWatch` holds, resumes and retries its watch."""

    timeout_s: int = 300
    """Server-side ``timeoutSeconds`` of one watch request, seconds; the next one resumes from the last
    version seen. Default 300."""
    read_slack_s: float = 30.0
    """The client gives up on a silent connection this long after ``timeout_s``, seconds. Default 30."""
    connect_timeout_s: float = 10.0
    """TCP/TLS connect timeout of each list or watch request, seconds. Default 10."""
    backoff_min_s: float = 0.5
    """Wait after the first failure in a row, seconds; doubles per further failure. Default 0.5."""
    backoff_max_s: float = 30.0
    """Longest wait between retries, seconds. Default 30."""
    bookmarks: bool = True
    """Ask for BOOKMARK events (``allowWatchBookmarks``): they move the resume point past changes that did not
    match the selector, so a resumed watch rarely falls out of the server's history. Default true."""


def backoff_s(failures: int, s: WatchSettings) -> float:
    """Wait before the next attempt after ``failures`` failures in a row (0: retry at once)."""
    if failures <= 0:
        return 0.0
    return float(min(s.backoff_max_s, s.backoff_min_s * 2 ** (failures - 1)))


def split_lines(pending: bytes, chunk: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines of ``pending + chunk`` (blank ones dropped) and the unfinished rest."""
    *lines, rest = (pending + chunk).split(b"\n")
    return [line for line in lines if line.strip()], rest


class Expired(Exception):
    """The resume version is older than the server keeps (410 Gone): list again."""


class Stopped(Exception):
    """:meth:`PodWatch.stop` was called while a request was open."""


def decode_event(line: bytes) -> tuple[str, Pod]:
    """(type, object) of one watch line; Expired for a 410 ERROR event, KubeError for any other ERROR."""
    try:
        event = json.loads(line)
    except ValueError:
        raise KubeError(f"undecodable watch event: {line[:200]!r}") from None
    kind, obj = str(event.get("type", "")), event.get("object")
    if not isinstance(obj, dict):
        raise KubeError(f"watch event {kind or '?'} without an object")
    if kind == "ERROR":
        if obj.get("code") == GONE:
            raise Expired(str(obj.get("message", "")))
        raise KubeError(f"watch error: {obj.get('code')} {obj.get('message') or obj.get('reason')}",
                        status=obj.get("code") if isinstance(obj.get("code"), int) else None)  # fmt: skip
    return kind, obj


def version_of(obj: Pod) -> str | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv else None


class PodWatch:
    """List then watch the pods of ``namespace`` matching ``selector`` until :meth:`stop`."""

    def __init__(
        self, client: KubeClient, namespace: str, selector: str, s: WatchSettings | None = None
    ) -> None:
        self.client, self.path, self.selector = client, f"/api/v1/namespaces/{namespace}/pods", selector
        self.s = s or WatchSettings()
        self.resource_version: str | None = None
        """Where the next watch resumes; None until the first list and after a 410 (list again)."""
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._open: urllib3.BaseHTTPResponse | None = None

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()  # read by the watching thread while another stops it

    def stop(self) -> None:
        """End :meth:`run` promptly: any thread, any time (before, during or after a request)."""
        self._stopped.set()
        with self._lock:
            if self._open is not None:
                _shutdown(self._open)

    def run(
        self,
        on_list: Callable[[list[Pod]], None],
        on_event: Callable[[str, Pod], None],
        on_error: Callable[[KubeError], None] | None = None,
    ) -> None:
        """The whole pod set after every (re)list, then each ADDED | MODIFIED | DELETED, until stopped."""
        failures = 0
        while not self._stopped.is_set():
            try:
                if self.resource_version is None:
                    pods, self.resource_version = self._list()
                    on_list(pods)
                quiet = True
                for kind, obj in self._watch(self.resource_version):
                    if kind != "BOOKMARK":
                        on_event(kind, obj)
                    self.resource_version = version_of(obj) or self.resource_version
                    quiet, failures = False, 0
                # The server ended the watch (its timeout): resume from where it stopped. A pause after one
                # that carried nothing keeps a server that closes watches at once from being hammered.
                if quiet:
                    self._stopped.wait(self.s.backoff_min_s)
                continue
            except Stopped:
                return
            except Expired:
                self.resource_version = None  # list again; at once the first time, with backoff if it repeats
                failures += 1
                self._stopped.wait(backoff_s(failures - 1, self.s))
                continue
            except KubeError as err:
                problem = err
                if err.status is not None:  # the API server refused: start over from a fresh list
                    self.resource_version = None
            except (urllib3.exceptions.HTTPError, OSError) as err:
                problem = KubeError(f"pod watch at {self.client.host} failed: {err}")
            if self._stopped.is_set():
                return
            failures += 1
            if on_error is not None:
                on_error(problem)
            self._stopped.wait(backoff_s(failures, self.s))

    def _list(self) -> tuple[list[Pod], str | None]:
        resp = self._request({"labelSelector": self.selector}, self.client.timeout_s)
        try:
            data = json.loads(_read_all(resp) or b"{}")
        finally:
            self._close(resp)
        items = [p for p in data.get("items") or () if isinstance(p, dict)]
        return items, version_of(data)

    def _watch(self, resource_version: str | None) -> Iterator[tuple[str, Pod]]:
        query = {"labelSelector": self.selector, "watch": "true", "timeoutSeconds": str(self.s.timeout_s)}
        if resource_version:
            query["resourceVersion"] = resource_version
        if self.s.bookmarks:
            query["allowWatchBookmarks"] = "true"
        resp = self._request(query, self.s.timeout_s + self.s.read_slack_s)
        try:
            pending = b""
            while chunk := resp.read1(65536):
                lines, pending = split_lines(pending, chunk)
                for line in lines:
                    yield decode_event(line)
        finally:
            self._close(resp)
        if self._stopped.is_set():
            raise Stopped

    def _request(self, query: dict[str, str], read_timeout_s: float) -> urllib3.BaseHTTPResponse:
        """Open a GET whose body is read as it arrives; registered so that :meth:`stop` can cut it."""
        if self._stopped.is_set():
            raise Stopped
        api = self.client.api
        method, url, headers, _, _ = api.param_serialize(
            method="GET", resource_path=self.path, query_params=list(query.items()),
            header_params={"Accept": JSON}, auth_settings=["BearerToken"],
        )  # fmt: skip
        timeout = (self.s.connect_timeout_s, read_timeout_s)
        resp: urllib3.BaseHTTPResponse = api.call_api(method, url, header_params=headers,
                                                      _request_timeout=timeout).response  # fmt: skip
        with self._lock:
            self._open = resp
            stopped = self._stopped.is_set()
        if stopped:
            self._close(resp)
            raise Stopped
        if resp.status >= 400:
            body = _read_all(resp)
            self._close(resp)
            data = json.loads(body) if body.startswith(b"{") else {"message": body.decode(errors="replace")}
            if resp.status == GONE:
                raise Expired(str(data.get("message", "")))
            raise api_error("GET", self.path, resp.status, data)
        return resp

    def _close(self, resp: urllib3.BaseHTTPResponse) -> None:
        with self._lock:
            if self._open is resp:
                self._open = None
        resp.close()
        resp.release_conn()


def _read_all(resp: urllib3.BaseHTTPResponse) -> bytes:
    return b"".join(iter(lambda: resp.read1(65536), b""))


def _shutdown(resp: urllib3.BaseHTTPResponse) -> None:
    """Unblock a thread reading ``resp`` (closing alone would wait for that read)."""
    with contextlib.suppress(ValueError, RuntimeError, OSError):  # released already, or no socket yet
        resp.shutdown()
