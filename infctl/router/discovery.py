"""Kubernetes discovery: ready engine pods, selected by label, become backends (and leave when they go).

A pod describes itself with these keys, each read from its labels, then from its annotations (what
``infctl render`` puts on engine pods is marked *rendered*):

====================================  ==============================================================
``infctl.io/role``                    prefill | decode | both (*rendered*; anything else counts as both)
``infctl.io/group``                   PD group; prefill and decode pair inside one (*rendered*, group mode)
``infctl.io/pool``                    pool that length buckets map to (*rendered*: a length pool's name, or
                                      prefill/decode in pool mode)
``infctl.io/draining``                ``"true"``: send it no new requests (set by the autoscaler on a pod a
                                      scale-in will remove)
``infctl.io/engine``                  engine adapter (*rendered*; default: the router's ``engine``)
``infctl.io/upstream``                upstream group for weighted splits and cutover (default ``default``)
``infctl.io/data-parallel-size``      N > 1: the pod serves N data-parallel ranks behind one port, and
                                      each rank r becomes its own backend ``<url>#dp<r>`` (own load, pinned
                                      the engine's way, ``dp_size`` N for its PD bootstrap rooms until the
                                      engine reports its own); default 1 (*rendered* when the engine's
                                      command line serves more than one rank)
``infctl.io/kv-events``               where the engine publishes KV-cache events: a port, or an endpoint
                                      (a bind address such as ``tcp://*:5557`` means the pod's IP); default:
                                      the container port named ``kv-events`` (*rendered* when the model
                                      profile enables ``kv_events``)
``infctl.io/bootstrap-port``          a parallel-style PD prefill's bootstrap port (SGLang's
                                      ``--disaggregation-bootstrap-port``), sent in each request's
                                      ``bootstrap_port``; default: the container port named ``bootstrap``
                                      (*rendered* on SGLang prefill pods, the profile's
                                      ``pd.bootstrap_port``), else the engine's default
container port ``http``               the engine's HTTP port (*rendered*; default ``DiscoverySettings.port``)
====================================  ==============================================================

Rank r of a data-parallel engine publishes its KV events on the base port + r (vLLM's and SGLang's
convention), so each rank gets its own subscription. A value that cannot be used (a data-parallel size of
``two``) is logged and ignored rather than dropping the pod.

:func:`targets_from_pod` and :func:`changes` are pure; :class:`Discovered` applies changes to the router's
pool and KV subscriptions on the event loop; :func:`discover` runs the list+watch of ``infctl.kube.watch`` in
a thread and stops it at once when the router stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from infctl.config.router import DiscoverySettings as DiscoverySettings  # the router file's discovery
from infctl.engines import DEFAULT_ENGINE, ENGINES
from infctl.errors import InfctlError
from infctl.manifests import labels
from infctl.manifests.group_layout import LAYOUT, member_of
from infctl.router.kv_events import KVSource
from infctl.router.ranks import backend_id, rank_endpoint
from infctl.router.snapshot import Backend, Role

if TYPE_CHECKING:
    from infctl.kube.client import KubeClient
    from infctl.kube.watch import PodWatch
    from infctl.router.state import RouterState

log = logging.getLogger(__name__)
_ROLES = ("prefill", "decode", "both")
KV_EVENTS = "infctl.io/kv-events"
"""Label or annotation: KV-events port or endpoint (overrides the ``kv-events`` container port)."""
KV_EVENTS_PORT = "kv-events"
"""Name of the container port the engine publishes KV events on (as ``infctl render`` names it)."""
BOOTSTRAP = "infctl.io/bootstrap-port"
"""Label or annotation: a PD prefill's bootstrap port (overrides the ``bootstrap`` container port)."""
BOOTSTRAP_PORT = "bootstrap"
"""Name of the container port a PD prefill's bootstrap server listens on (as ``infctl render`` names it)."""
STOP_GRACE_S = 2.0
"""Longest the router waits for the watch thread on shutdown, seconds (it ends at once unless it is still
connecting; it is a daemon thread, so it never holds the process)."""


@dataclass(frozen=True)
class PodTargets:
    """What one ready pod contributes: its backends (one per DP rank) and their KV-event sources."""

    backends: tuple[Backend, ...]
    kv_sources: tuple[KVSource, ...] = ()
    problems: tuple[str, ...] = ()
    """Values the pod carries that could not be used (and were ignored)."""


def targets_from_pod(pod: Mapping[str, Any], s: DiscoverySettings) -> PodTargets | None:
    """What a pod serves, or None while it is not ready to serve (or is terminating)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    ip = status.get("podIP")
    if not ip or meta.get("deletionTimestamp") or status.get("phase", "Running") != "Running":
        return None
    if not any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
    ):
        return None
    keys = {**(meta.get("annotations") or {}), **(meta.get("labels") or {})}
    problems: list[str] = []
    member = member_of(keys) if LAYOUT in keys else None  # a pod of a PD-group set (one LWS group a group)
    if LAYOUT in keys and member is None:
        problems.append(f"{LAYOUT}={keys[LAYOUT]!r} with no readable LeaderWorkerSet indexes: labels used")
    if member is not None and not member.serves:
        return None  # a rank of a multi-node engine: its rank 0 serves for it
    role = member.role if member is not None else keys.get(labels.ROLE, "both")
    engine = keys.get(labels.ENGINE, s.engine or DEFAULT_ENGINE)
    if engine not in ENGINES:
        problems.append(
            f"{labels.ENGINE}={engine!r} is no engine infctl knows ({', '.join(sorted(ENGINES))})"
        )
        engine = s.engine or DEFAULT_ENGINE
    ranks = _count(keys.get(labels.DP_SIZE), labels.DP_SIZE, problems)
    bootstrap = _bootstrap_port(pod, keys.get(BOOTSTRAP), problems)
    url = f"http://{_host(ip)}:{_named_port(pod, 'http') or s.port}"
    backends = tuple(
        Backend(
            id=backend_id(url, None if ranks == 1 else rank),
            url=url,
            role=cast(Role, role if role in _ROLES else "both"),
            group=member.group if member is not None else keys.get(labels.GROUP),
            pool=keys.get(labels.POOL),
            upstream=keys.get(labels.UPSTREAM, "default"),
            engine=engine,
            dp_rank=None if ranks == 1 else rank,
            dp_size=None if ranks == 1 else ranks,
            bootstrap_port=bootstrap,
            # Being scaled away: no new requests, those in flight finish (infctl.autoscaler.kube_drain).
            draining=keys.get(labels.DRAINING) == "true",
        )
        for rank in range(ranks)
    )
    endpoint = _kv_endpoint(pod, ip, keys.get(KV_EVENTS), problems)
    sources: tuple[KVSource, ...] = ()
    if endpoint is not None:
        sources = tuple(
            KVSource(endpoint=rank_endpoint(endpoint, b.dp_rank), backends={b.dp_rank: b.id, None: b.id})
            for b in backends
        )
    return PodTargets(backends, sources, tuple(problems))


def _count(value: str | None, key: str, problems: list[str]) -> int:
    if value is None:
        return 1
    if value.isdigit() and 1 <= int(value) <= 1024:
        return int(value)
    problems.append(f"{key}={value!r} is not a count of ranks (1..1024)")
    return 1


def _bootstrap_port(pod: Mapping[str, Any], value: str | None, problems: list[str]) -> int | None:
    if value is None:
        return _named_port(pod, BOOTSTRAP_PORT)
    if value.isdigit() and 1 <= int(value) <= 65535:
        return int(value)
    problems.append(f"{BOOTSTRAP}={value!r} is not a port (1..65535)")
    return _named_port(pod, BOOTSTRAP_PORT)


def _kv_endpoint(pod: Mapping[str, Any], ip: str, value: str | None, problems: list[str]) -> str | None:
    if value is None:
        named = _named_port(pod, KV_EVENTS_PORT)
        return f"tcp://{_host(ip)}:{named}" if named else None
    if value.isdigit():
        return f"tcp://{_host(ip)}:{value}"
    scheme, sep, rest = value.partition("://")
    host, colon, port = rest.rpartition(":")
    if scheme != "tcp" or not sep or not colon or not port.isdigit():
        problems.append(f"{KV_EVENTS}={value!r} is neither a port nor an endpoint such as tcp://*:5557")
        return None
    return f"tcp://{_host(ip) if host in ('*', '0.0.0.0', '', '[::]') else host}:{port}"


def _host(ip: str) -> str:
    """``ip`` as a URL's host: an IPv6 address in brackets (``fd00::5`` -> ``[fd00::5]``)."""
    return f"[{ip}]" if ":" in ip and not ip.startswith("[") else ip


def _named_port(pod: Mapping[str, Any], name: str) -> int | None:
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") == name and isinstance(port.get("containerPort"), int):
                return int(port["containerPort"])
    return None


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def changes(
    known: Mapping[str, PodTargets], want: Mapping[str, PodTargets]
) -> tuple[list[str], dict[str, PodTargets]]:
    """(pod keys to take out, pod key -> targets to put in): a pod whose targets changed is in both."""
    remove = [key for key, old in known.items() if want.get(key) != old]
    add = {key: t for key, t in want.items() if known.get(key) != t}
    return remove, add


def wanted(pods: Iterable[Mapping[str, Any]], s: DiscoverySettings) -> dict[str, PodTargets]:
    """Pod key -> targets of every ready pod in a full list."""
    found = ((pod_key(p), targets_from_pod(p, s)) for p in pods)
    return {key: t for key, t in found if t is not None}


class Discovered:
    """Applies discovery results to the router's pool and KV subscriptions (loop thread only)."""

    def __init__(self, state: RouterState, s: DiscoverySettings) -> None:
        self.state, self.s = state, s
        self.by_pod: dict[str, PodTargets] = {}

    def on_list(self, pods: list[dict[str, Any]]) -> None:
        self._apply(*changes(self.by_pod, wanted(pods, self.s)))

    def on_event(self, kind: str, pod: dict[str, Any]) -> None:
        key = pod_key(pod)
        targets = None if kind == "DELETED" else targets_from_pod(pod, self.s)
        want = {k: t for k, t in self.by_pod.items() if k != key}
        if targets is not None:
            want[key] = targets
        self._apply(*changes(self.by_pod, want))

    def close(self) -> None:
        """Stop crediting KV events to discovered backends (the pool stays as it is): an endpoint nobody
        else credits is no longer followed."""
        for targets in self.by_pod.values():
            for src in targets.kv_sources:
                self._unfollow(src)

    def _apply(self, remove: list[str], add: dict[str, PodTargets]) -> None:
        keep = {b.id for t in add.values() for b in t.backends}
        keep_kv = {src.endpoint: src for t in add.values() for src in t.kv_sources}
        for key in remove:
            old = self.by_pod.pop(key)
            for b in old.backends:
                if b.id not in keep and self.state.pool.remove(b.id) is not None:
                    self.state.core.forget(b.id)
                    log.info("lost %s (%s)", b.id, key)
            for src in old.kv_sources:
                if keep_kv.get(src.endpoint) != src:
                    self._unfollow(src)
        for key, targets in add.items():
            for problem in targets.problems:
                log.warning("pod %s: %s", key, problem)
            for b in targets.backends:
                new = b.id not in self.state.pool
                self.state.pool.add(b)
                if new:
                    log.info("discovered %s (%s)", b.id, key)
                    self.state.scrape_soon(b.id)
            for src in targets.kv_sources:
                self.state.follow_kv_events(src)  # the same source, kept across a change: no change
            self.by_pod[key] = targets

    def _unfollow(self, source: KVSource) -> None:
        for backend in set(source.backends.values()):
            self.state.unfollow_kv_events(backend)


async def discover(
    state: RouterState, s: DiscoverySettings, connect: Callable[[], KubeClient], stop: asyncio.Event
) -> None:
    """Keep the pool equal to the ready pods matching ``s.selector`` until ``stop`` is set.

    The kube layer is imported and ``connect`` called on the watch's thread, not on the event loop: they
    take 0.1-0.15 s of CPU (the ``kubernetes`` package; a kubeconfig or the service account's files), and an
    API server slow to answer would otherwise hold whatever the router serves meanwhile (static backends,
    ``/health``, ``/metrics``). A client that cannot be built is logged, and discovery stops."""
    loop = asyncio.get_running_loop()
    target = Discovered(state, s)
    ended = loop.create_future()
    stopping = threading.Event()
    lock = threading.Lock()
    watches: list[PodWatch] = []
    """The thread's watch once made, for the loop to stop."""

    def call(fn: Callable[..., None], *args: Any) -> None:
        if not stopping.is_set():
            with contextlib.suppress(RuntimeError):  # the loop closed under a thread left connecting
                loop.call_soon_threadsafe(fn, *args)

    def run() -> None:
        client: KubeClient | None = None
        try:
            from infctl.kube.watch import PodWatch, WatchSettings  # only when discovery is used

            client = connect()
            settings = WatchSettings(timeout_s=s.watch_timeout_s, backoff_max_s=s.retry_max_s)
            watch = PodWatch(client, s.namespace, s.selector, settings)
            with lock:
                if stopping.is_set():
                    return
                watches.append(watch)
            watch.run(
                on_list=lambda pods: call(target.on_list, pods),
                on_event=lambda kind, pod: call(target.on_event, kind, pod),
                on_error=lambda err: log.warning("discovery: %s", err.message),
            )
        except InfctlError as err:
            log.error("discovery stopped: %s", err.message)
        finally:
            if client is not None:
                client.close()
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, ended)

    threading.Thread(target=run, name="infctl-discovery", daemon=True).start()
    try:
        await stop.wait()
    finally:
        stopping.set()
        with lock:
            for watch in watches:
                watch.stop()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(ended), STOP_GRACE_S)
        target.close()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
