"""PromQL over an engine's signal gauges, counted as its adapter counts a scrape: the one rule behind the
alert rules, dashboards and KEDA triggers that read an engine's waiting or running requests.

An expression built here has one series per rank and gauge, for the caller to add up (``sum by (pod)``):

- copies of one rank's gauge (:attr:`~infctl.engines.base.SignalMetrics.copy_labels`: SGLang with TP>1 and
  ``--enable-metrics-for-all-schedulers`` exports each scheduler gauge once per tp/pp/moe_ep rank) are taken
  once, by their largest, where a sum would multiply the queue by TP;
- shares of a total (:attr:`~infctl.engines.base.SignalMetrics.share_label`: SGLang's per-priority series
  beside the total) are left out, where a sum would count each request twice;
- several gauges (a PD engine's waiting requests, :attr:`~infctl.engines.base.SignalMetrics.queues`) are
  kept apart under :data:`GAUGE_LABEL` through the copies' ``max``, which drops the metric name and would
  otherwise take the largest gauge instead of adding them; their union (``or``) holds whichever gauges the
  engine's release exports, where ``a + b`` would answer nothing for a release without ``b``.
"""

from __future__ import annotations

from infctl.engines.base import SignalMetrics

GAUGE_LABEL = "infctl_gauge"
"""Added to each gauge's series when an expression reads several, to keep them apart (the gauge's name)."""


def gauge_series(
    metrics: SignalMetrics, names: tuple[str, ...], selector: str, *, deriv: str | None = None
) -> str:
    """One series per rank of each gauge in ``names`` (label matchers ``selector``, without braces); with
    ``deriv`` (a range such as ``10m``) the per-second derivative of each instead."""
    matchers = [selector] if selector else []
    if metrics.share_label is not None:
        matchers.append(f'{metrics.share_label}=""')  # also matches a series without the label
    terms = []
    for name in names:
        term = f"{name}{{{','.join(matchers)}}}"
        if deriv is not None:
            term = f"deriv({term}[{deriv}])"
        if len(names) > 1:
            term = f'label_replace({term}, "{GAUGE_LABEL}", "{name}", "", "")'
        terms.append(term)
    expr = " or ".join(terms)
    if not metrics.copy_labels:
        return expr
    return f"max without ({', '.join(metrics.copy_labels)}) ({expr})"


def waiting_series(metrics: SignalMetrics, selector: str, *, deriv: str | None = None) -> str:
    """The engine's waiting requests (:attr:`~infctl.engines.base.SignalMetrics.queues`) as
    :func:`gauge_series`: ``sum by (pod)`` of it is each engine's queue, as its adapter reads it."""
    return gauge_series(metrics, metrics.queues, selector, deriv=deriv)


def running_series(metrics: SignalMetrics, selector: str) -> str:
    """The engine's running requests as :func:`gauge_series`."""
    return gauge_series(metrics, (metrics.running,), selector)
