"""The autoscaler's Prometheus source reads a PD SGLang engine's queue as the adapter reads its scrape and as
the rendered alert rules sum it: its instant query asks for the PD queue gauges, and Prometheus' answer (TP
copies, DP ranks, priority shares, pods told apart by ``pod``) becomes each pod's waiting requests plus the
requests it holds and does not compute yet (3d0bbb9)."""

from __future__ import annotations

import re

import httpx

from infctl.autoscaler.promql import PrometheusSource, query_signals
from infctl.engines import get_adapter, sglang
from infctl.telemetry import make_client

SGLANG = get_adapter("sglang")


def sample(name: str, pod: str, role: str, value: float, **labels: str) -> dict[str, object]:
    metric = {
        "__name__": name,
        "namespace": "inference",
        "pod": pod,
        "infctl_io_role": role,
        "model_name": "m",
        "engine_type": role,
        "tp_rank": "0",
        "pp_rank": "0",
        "moe_ep_rank": "0",
        **labels,
    }
    return {"metric": metric, "value": [1.7e9, str(value)]}


def answer() -> list[dict[str, object]]:
    """A prefill with 2 DP ranks, each exported by 2 TP ranks (their own moe_ep_rank); a decode with
    priority scheduling (the total is the series without ``priority``: Prometheus drops empty labels)."""
    out = []
    for dp, (queue, bootstrap, inflight) in enumerate(((3, 5, 7), (0, 4, 9))):
        for tp in ("0", "1"):
            ranks = {"dp_rank": str(dp), "tp_rank": tp, "moe_ep_rank": tp}
            out += [
                sample(sglang.NUM_QUEUE_REQS, "p-0", "prefill", queue, **ranks),
                sample(sglang.NUM_PREFILL_BOOTSTRAP_QUEUE_REQS, "p-0", "prefill", bootstrap, **ranks),
                sample(sglang.NUM_PREFILL_INFLIGHT_QUEUE_REQS, "p-0", "prefill", inflight, **ranks),
                sample(sglang.NUM_RUNNING_REQS, "p-0", "prefill", 1, **ranks),
            ]
    for name, total, shares in (
        (sglang.NUM_QUEUE_REQS, 4, (3, 1)),
        (sglang.NUM_DECODE_PREALLOC_QUEUE_REQS, 2, (2, 0)),
        (sglang.NUM_DECODE_TRANSFER_QUEUE_REQS, 5, (1, 4)),
        (sglang.NUM_RUNNING_REQS, 30, (10, 20)),
    ):
        out.append(sample(name, "d-0", "decode", total))
        out += [sample(name, "d-0", "decode", n, priority=str(p)) for p, n in enumerate(shares)]
    return out


async def test_the_prometheus_source_sums_an_sglang_pods_waiting_and_pd_queues() -> None:
    seen: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.url.params["query"])
        data = {"resultType": "vector", "result": answer()}
        return httpx.Response(200, json={"status": "success", "data": data})

    source = PrometheusSource("http://prom:9090", {"namespace": "inference"})
    async with make_client(httpx.MockTransport(handler)) as c:
        d, p = await query_signals(c, source, SGLANG)
    assert (p.name, p.role, p.queue, p.running) == ("p-0", "prefill", 3 + 5 + 0 + 4, 2)
    assert (d.name, d.role, d.queue, d.running) == ("d-0", "decode", 4 + 2 + 5, 30)
    (names,) = re.findall(r'__name__=~"\(([^)]*)\)', seen[0])
    assert set(sglang.SIGNAL_METRICS.queues) <= set(names.split("|"))
