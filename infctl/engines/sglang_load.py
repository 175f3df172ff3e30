"""SGLang's load endpoints: ``/v1/loads`` (current releases, one entry per data-parallel rank) and the legacy
``/get_load`` list, read into a :class:`~infctl.telemetry.signals.LoadReport` (the adapter's
``load_paths``, tried in that order). Pure: a parsed JSON body in, a record out.
"""

from __future__ import annotations

from infctl.errors import EngineError
from infctl.telemetry.signals import LoadReport, RankLoad


def parse_load(body: object) -> LoadReport:
    """``/v1/loads`` (``{"loads": [per rank]}``) or the legacy ``/get_load`` list.

    Legacy entries count ``num_reqs`` as running + waiting.
    """
    if isinstance(body, dict) and isinstance(body.get("loads"), list):
        ranks = tuple(_rank(r, legacy=False) for r in body["loads"])
    elif isinstance(body, list):
        ranks = tuple(_rank(r, legacy=True) for r in body)
    else:
        raise EngineError(
            f"SGLang load endpoint answered {str(body)[:120]!r}",
            hint="expected /v1/loads {'loads': [...]} or /get_load [...]",
        )
    usages = [r.kv_usage for r in ranks if r.kv_usage is not None]
    running = sum(r.running for r in ranks)
    waiting = sum(r.waiting for r in ranks)
    return LoadReport(
        in_flight=running + waiting,
        running=running,
        waiting=waiting,
        kv_usage=sum(usages) / len(usages) if usages else None,
        ranks=ranks,
    )


def _rank(raw: object, *, legacy: bool) -> RankLoad:
    if not isinstance(raw, dict):
        raise EngineError(f"SGLang load entry {str(raw)[:80]!r} is not an object")
    try:
        waiting = float(raw.get("num_waiting_reqs", 0))
        running = float(raw["num_reqs"]) - waiting if legacy else float(raw["num_running_reqs"])
        usage = raw.get("token_usage")
        return RankLoad(
            int(raw.get("dp_rank", 0)),
            max(running, 0.0),
            waiting,
            float(usage) if usage is not None else None,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise EngineError(f"SGLang load entry {str(raw)[:80]!r} lacks {e}") from None
