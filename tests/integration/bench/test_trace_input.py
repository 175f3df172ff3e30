"""``infctl bench --trace`` on hostile traces, against a simulated engine: one error line, never a hang.

Before issue 18 a ``NaN`` or ``1e999`` timestamp passed validation and the replay waited for it forever with
no output, and a line of invalid UTF-8 ended in a traceback without a line number.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path

import pytest

GOOD = json.dumps({"timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1]})


async def bench(url: str, trace: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "infctl",
        "bench",
        "--url",
        url,
        "--trace",
        str(trace),
        "--trace-block-size",
        "8",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=trace.parent,
        env={**os.environ, "COLUMNS": "300"},
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 45)
    finally:
        if proc.returncode is None:  # the old replay never ended: do not leave it running
            proc.kill()
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
    return proc.returncode or 0, err.decode()


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("second", "message"),
    [
        (b'{"timestamp": NaN, "input_length": 8, "output_length": 2, "hash_ids": [2]}', "timestamp: "),
        (b'{"timestamp": 1e999, "input_length": 8, "output_length": 2, "hash_ids": [2]}', "timestamp: "),
        (GOOD.encode()[:-1] + b', "note": "caf\xe9"}', "not UTF-8 text (byte 0xe9"),
    ],
)
async def test_a_bad_trace_line_is_one_error_with_its_line(  # type: ignore[no-untyped-def]
    start_sim, tmp_path: Path, second: bytes, message: str
) -> None:
    url = (await start_sim()).urls[0]
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(GOOD.encode() + b"\n" + second + b"\n")
    code, err = await bench(url, trace)
    assert code == 2, err
    assert f"error: {trace}:2: {message}" in err and "Traceback" not in err
