"""Pure routing policies: filters -> weighted scorers -> picker over a frozen snapshot."""

from infctl.router.policies.buckets import Bucket, BucketConfig, bucket_candidates, parse_buckets
from infctl.router.policies.pd import PDDecision, PDSettings, pick_pd
from infctl.router.policies.pipeline import Policy, build_policy
from infctl.router.policies.presets import PRESETS
from infctl.router.policies.types import Context, Decision, Filter, Picker, PolicyState, Scorer
from infctl.router.policies.weights import UpstreamConfig, mirror_target, pick_upstream, should_mirror

__all__ = [
    "PRESETS",
    "Bucket",
    "BucketConfig",
    "Context",
    "Decision",
    "Filter",
    "PDDecision",
    "PDSettings",
    "Picker",
    "Policy",
    "PolicyState",
    "Scorer",
    "UpstreamConfig",
    "bucket_candidates",
    "build_policy",
    "mirror_target",
    "parse_buckets",
    "pick_pd",
    "pick_upstream",
    "should_mirror",
]
