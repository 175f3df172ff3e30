"""The cluster simulator: many unchanged ``EngineCore``s, the live router's ``RouterCore`` and
``BackendPool``, and the autoscaler's ``desired_replicas``, on one virtual clock.

    result = simulate(SimConfig(workload=..., load=..., engines=16, policy="cache_aware"))
    result.bench.to_dict()      # the infctl bench schema (TTFT/TPOT/ITL/E2E, throughput, goodput, hit rate)
    result.gpu_hours, result.replicas

Modules: ``config`` (the scenario), ``traffic`` (bench's load plan on the virtual clock), ``prompts`` (token
ids), ``fleet`` (engines, start-up, drain), ``routing`` (snapshots from the engines -> RouterCore),
``scaling`` (the autoscaler on a tick), ``events`` (the heap), ``engine_loop`` (the loop), ``flights`` (a
request from send to answer), ``pd`` (PD layouts and KV links), ``admission`` (the router's queue),
``result``.
"""

from infctl.sim.cluster.config import AutoscaleSettings, SimConfig, variant_scrape_interval
from infctl.sim.cluster.engine_loop import SimProgress
from infctl.sim.cluster.result import SimResult
from infctl.sim.cluster.run import simulate
from infctl.sim.cluster.scaling import ReplicaPoint, ScaleEvent

__all__ = [
    "AutoscaleSettings",
    "ReplicaPoint",
    "ScaleEvent",
    "SimConfig",
    "SimProgress",
    "SimResult",
    "simulate",
    "variant_scrape_interval",
]
