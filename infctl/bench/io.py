"""Writing results: the JSON summary and the per-request rows (JSON lines or CSV, by file suffix)."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from infctl.bench.metrics import request_metrics
from infctl.bench.records import RequestRecord
from infctl.errors import ConfigError

REQUEST_COLUMNS = (
    "index", "stage", "scheduled_s", "sent_s", "end_s", "send_lag_ms", "ttft_ms", "tpot_ms", "e2e_ms",
    "input_tokens", "output_tokens", "cached_tokens", "content_events", "error", "error_kind", "status",
    "error_detail", "session", "group",
)  # fmt: skip


def request_row(rec: RequestRecord) -> dict[str, Any]:
    m = request_metrics(rec)

    def ms(x: float | None) -> float | None:
        return None if x is None else round(x * 1000.0, 4)

    return {
        "index": rec.index, "stage": rec.stage, "scheduled_s": round(rec.scheduled_s, 6),
        "sent_s": round(rec.sent_s, 6), "end_s": round(rec.end_s, 6), "send_lag_ms": ms(rec.send_lag_s),
        "ttft_ms": ms(m.ttft_s), "tpot_ms": ms(m.tpot_s), "e2e_ms": ms(m.e2e_s),
        "input_tokens": rec.input_tokens, "output_tokens": rec.output_tokens,
        "cached_tokens": rec.cached_tokens, "content_events": len(rec.chunk_times), "error": rec.error,
        "error_kind": rec.error_kind, "status": rec.status, "error_detail": rec.error_detail or None,
        "session": rec.session, "group": rec.group,
    }  # fmt: skip


def write_requests(records: Iterable[RequestRecord], path: str | Path) -> Path:
    """One row per request: CSV for ``*.csv``, else JSON lines (which also carry every ITL gap)."""
    p = Path(path)
    with _open(p) as f:
        if p.suffix.lower() == ".csv":
            writer = csv.DictWriter(f, fieldnames=REQUEST_COLUMNS)
            writer.writeheader()
            for rec in records:
                writer.writerow(request_row(rec))
        else:
            for rec in records:
                row = request_row(rec)
                row["itl_ms"] = [round(g * 1000.0, 4) for g in request_metrics(rec).itl_s]
                f.write(json.dumps(row, separators=(",", ":")) + "\n")
    return p


def save_json(data: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``data`` as indented JSON, atomically (a reader never sees half a file)."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp")
    with _open(tmp) as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, p)
    return p


def save_text(text: str, path: str | Path) -> Path:
    p = Path(path)
    with _open(p) as f:
        f.write(text)
    return p


def _open(p: Path) -> Any:
    try:
        if p.parent and not p.parent.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
        return p.open("w", encoding="utf-8", newline="")
    except OSError as e:
        raise ConfigError(f"{p}: cannot write: {e.strerror or e}", hint="choose a writable path") from None
