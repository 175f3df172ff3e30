"""Prometheus text parsing and scraping, shared by router, autoscaler, bench and doctor."""

from infctl.telemetry.signals import EngineSignals

__all__ = ["EngineSignals"]
