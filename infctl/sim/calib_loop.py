"""Closing the loop: serve a fitted profile from a real ``infctl sim`` process and measure it the same way.

The simulated engine adds latency of its own (HTTP, its event loop; ~2 ms per request and ~0.2 ms per token
here), and the client's own costs land in every measurement. Measuring the simulator with the procedure that
measured the real engine, and moving each coefficient by the difference between the two fits, makes the
simulator *as served* reproduce the real engine's numbers::

    corrected = real_fit + (real_fit - fit_of_sim_serving(real_fit))      (clamped at 0)

The simulator runs in a child process (another interpreter, so it does not share the client's event loop or
GIL), on a free 127.0.0.1 port, and is stopped on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from infctl.errors import EngineError
from infctl.sim.calib_fit import StepFit
from infctl.sim.calib_profile import CalibratedProfile, write_profile_file
from infctl.sim.profiles import SimProfile

START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def simulated_engine(
    profile: SimProfile,
    session: aiohttp.ClientSession,
    *,
    python: str = sys.executable,
    tokenizer: str | None = None,
) -> AsyncIterator[str]:
    """``async with simulated_engine(profile, session) as url``: ``infctl sim --profile`` in a child,
    counting prompts with ``tokenizer`` (``infctl sim --tokenizer``; default the simulator's)."""
    with tempfile.TemporaryDirectory(prefix="infctl-calib-") as tmp:
        path = Path(tmp) / "profile.json"
        write_profile_file(path, profile)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = await asyncio.create_subprocess_exec(
            python, "-m", "infctl", "sim", "--profile", str(path), "--host", "127.0.0.1", "--port", str(port),
            *(["--tokenizer", tokenizer] if tokenizer else []),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            await _wait_healthy(proc, session, url)
            yield url
        finally:
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 10)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


async def _wait_healthy(proc: asyncio.subprocess.Process, session: aiohttp.ClientSession, url: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT_S
    while loop.time() < deadline:
        if proc.returncode is not None:
            err = b"" if proc.stderr is None else await proc.stderr.read()
            raise EngineError(
                f"the simulated engine exited with code {proc.returncode}: {err.decode()[-300:]}",
                hint="run `infctl sim --profile FILE` by hand to see why",
            )
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            async with session.get(url + "/health", timeout=aiohttp.ClientTimeout(total=1)) as resp:
                if resp.status == 200:
                    return
        await asyncio.sleep(0.1)
    raise EngineError(f"the simulated engine at {url} was not healthy in {START_TIMEOUT_S:g} s")


def corrected(real: StepFit, served: StepFit) -> dict[str, float]:
    """Each coefficient moved by how far the served simulator's fit landed from the real one (>= 0)."""
    return {k: max(0.0, 2 * v - served.coefficients.get(k, 0.0)) for k, v in real.coefficients.items()}


def with_coefficients(profile: CalibratedProfile, coefficients: dict[str, float]) -> CalibratedProfile:
    known = {f.name for f in dataclasses.fields(profile)}
    changes: dict[str, object] = {k: v for k, v in coefficients.items() if k in known}
    return dataclasses.replace(profile, **changes)  # type: ignore[arg-type]
