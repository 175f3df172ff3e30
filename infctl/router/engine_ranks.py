"""The data-parallel rank count an engine reports, read where the router already talks to it (the health
probe round), so that an SGLang PD prefill's bootstrap rooms follow the engine, not what its backend was
given.

A PD prefill pinned to rank r of n must get rooms with ``room % n == r``
(``infctl.engines.new_bootstrap_room``), and n is given by the router file's ``dp_size`` or the pod label
``infctl.io/data-parallel-size``. Either can be wrong for the engine that runs (another image, another
command line), and a wrong n sends the prefill to another rank than the pin's: its KV transfer fails. So
the router reads the engine's count (``EngineAdapter.reported_dp_ranks`` over
``diagnostics.server_info_paths``: SGLang's ``/server_info``) once per engine, and again when one of its
backends is re-admitted (the engine may have restarted otherwise), and the pool's backends of that engine
take it (``BackendPool.record_dp_ranks``). The decision stays pure: the room is drawn from the backend's
``dp_size``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from infctl.router.snapshot import Backend
from infctl.telemetry.scrape import NoAnswer

if TYPE_CHECKING:
    from infctl.router.state import RouterState

log = logging.getLogger(__name__)


def to_read(state: RouterState, answered: Iterable[str], readmitted: Collection[str]) -> list[str]:
    """One backend id per engine whose rank count to read now: of the pinned PD prefill backends whose probe
    just answered, each engine not read yet or one of whose backends was just re-admitted."""
    chosen: dict[str, str] = {}
    for bid in answered:
        if bid not in state.pool:
            continue
        b = state.pool.backend(bid)
        if b.role != "prefill" or b.dp_rank is None or b.url in chosen:
            continue
        if not state.adapter(bid).diagnostics.server_info_paths:
            continue
        if state.pool.engine_ranks(b.url) is None or bid in readmitted:
            chosen[b.url] = bid
    return list(chosen.values())


async def read_engine_ranks(state: RouterState, backend_ids: Iterable[str]) -> None:
    """Read the rank count of each backend's engine and give it to the engine's backends; an engine that
    answers none keeps the count its backends were given (tried again at the next probe round)."""
    ids = list(backend_ids)
    counts = await asyncio.gather(*(_read(state, bid) for bid in ids))
    for bid, (url, ranks) in zip(ids, counts, strict=True):
        if ranks is not None and bid in state.pool:
            for backend, given in state.pool.record_dp_ranks(url, ranks):
                _warn(backend, given, ranks)


async def _read(state: RouterState, backend_id: str) -> tuple[str, int | None]:
    url, adapter = state.pool.backend(backend_id).url, state.adapter(backend_id)
    for path in adapter.diagnostics.server_info_paths:
        try:
            status, body = await state.scraper(url + path, state.cfg.probe_timeout_s)
        except NoAnswer:
            return url, None
        if status != 200:
            continue
        try:
            return url, adapter.reported_dp_ranks(json.loads(body))
        except ValueError:
            return url, None
    return url, None


def _warn(backend: Backend, given: int | None, ranks: int) -> None:
    said = f"dp_size {given}" if given is not None else "no dp_size"
    lacks = f"; it pins rank {backend.dp_rank}, which the engine lacks: out of rotation"
    lacks = "" if backend.healthy else lacks
    log.warning(
        "PD prefill %s: its engine reports %d data-parallel ranks and the backend was given %s (router file "
        "dp_size or the pod's infctl.io/data-parallel-size); bootstrap rooms are drawn for the engine's %d%s",
        backend.id,
        ranks,
        said,
        ranks,
        lacks,
    )
