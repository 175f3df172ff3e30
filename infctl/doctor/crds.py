"""The custom kinds infctl can use, grouped by the project that installs them, and the verdict on which are
served (by API discovery, which every authenticated user may read, unlike the CRD list itself).

Kinds infctl renders come from ``infctl.manifests.KINDS`` with their install hints; RBG, which it does
not render yet, is listed here with its own. A family only one platform serves (GKE's GCPBackendPolicy)
is a finding only when the profile renders it: missing elsewhere is the normal case, not a warning.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from infctl.doctor.result import CheckResult, Group, failed, passed, skipped, warned
from infctl.manifests import KINDS

G: Group = "cluster"


@dataclass(frozen=True, slots=True)
class CRDFamily:
    name: str
    kinds: tuple[tuple[str, str], ...]
    """(apiVersion, plural) of every kind the family serves; a bare group (no ``/version``) accepts any
    version, for kinds infctl does not render and whose projects still move between alpha versions."""
    install: str
    platform: str | None = None
    """The one platform that serves the family (its own controller installs the CRD); None: any cluster
    may. Without a profile that renders it, a missing platform family is a skip, not a warning."""


def _install(api_version: str, fallback: str) -> str:
    return next((k.install for k in KINDS if k.api_version == api_version and k.install), fallback)


def _rendered(api_version: str) -> tuple[tuple[str, str], ...]:
    return tuple((k.api_version, k.plural) for k in KINDS if k.api_version == api_version)


FAMILIES: tuple[CRDFamily, ...] = (
    CRDFamily(
        "Gateway API",
        _rendered("gateway.networking.k8s.io/v1"),
        _install("gateway.networking.k8s.io/v1", "install the Gateway API CRDs"),
    ),
    CRDFamily(
        "InferencePool",
        _rendered("inference.networking.k8s.io/v1"),
        _install("inference.networking.k8s.io/v1", "install the Gateway API Inference Extension CRDs"),
    ),
    CRDFamily(
        "LeaderWorkerSet",
        _rendered("leaderworkerset.x-k8s.io/v1"),
        _install("leaderworkerset.x-k8s.io/v1", "install LeaderWorkerSet"),
    ),
    CRDFamily(
        "Volcano PodGroup",
        _rendered("scheduling.volcano.sh/v1beta1"),
        _install("scheduling.volcano.sh/v1beta1", "install Volcano"),
    ),
    CRDFamily(
        "coscheduling PodGroup (scheduler-plugins)",
        _rendered("scheduling.x-k8s.io/v1alpha1"),
        _install("scheduling.x-k8s.io/v1alpha1", "install scheduler-plugins with coscheduling"),
    ),
    CRDFamily(
        "Kueue",
        tuple((k, p) for k in ("kueue.x-k8s.io",) for p in ("topologies", "resourceflavors", "localqueues")),
        _install("kueue.x-k8s.io/v1beta2", "install Kueue"),
    ),
    CRDFamily(
        "RoleBasedGroup (RBG)",
        (("workloads.x-k8s.io", "rolebasedgroups"),),
        "install RBG: kubectl apply --server-side -f the manifests of a release of "
        "https://github.com/sgl-project/rbg",
    ),
    CRDFamily(
        "Prometheus Operator",
        _rendered("monitoring.coreos.com/v1"),
        _install("monitoring.coreos.com/v1", "install the Prometheus Operator CRDs"),
    ),
    CRDFamily(
        "KEDA",
        _rendered("keda.sh/v1alpha1"),  # a profile's scale_to_zero.scaler: keda renders ScaledObjects
        _install("keda.sh/v1alpha1", "install KEDA"),
    ),
    CRDFamily(
        "GKE GCPBackendPolicy",
        _rendered("networking.gke.io/v1"),  # cluster.gateway: gke renders one in place of route timeouts
        _install("networking.gke.io/v1", "enable the GKE Gateway controller"),
        platform="GKE",
    ),
)

DISCOVERED = sorted({api for f in FAMILIES for api, _ in f.kinds})
"""apiVersions (or bare groups: every version of them) to read with discovery."""

Served = Mapping[str, Collection[str]]
"""apiVersion or bare group -> plurals the server lists for it (absent: not served)."""


def evaluate_crds(
    served: Served, needed: Collection[tuple[str, str]] | None, *, target: str = ""
) -> list[CheckResult]:
    """One finding per family. ``needed`` is what the profile renders; None without a profile, when a
    missing family only warns."""
    out = []
    for fam in FAMILIES:
        missing = [(api, plural) for api, plural in fam.kinds if plural not in served.get(api, ())]
        name = f"crds: {fam.name}"
        if not missing:
            out.append(passed(G, name, f"served: {', '.join(p for _, p in fam.kinds)}", target=target))
            continue
        lacking = ", ".join(f"{plural}.{api.split('/')[0]}" for api, plural in missing)
        wanted = [k for k in missing if needed is not None and k in needed]
        if wanted:
            out.append(
                failed(
                    G, name, f"missing, and the profile renders them: {lacking}", fam.install, target=target
                )
            )
        elif needed is None and fam.platform is None:
            out.append(warned(G, name, f"missing: {lacking}", fam.install, target=target))
        else:
            why = "the profile does not need it" if needed is not None else f"needed only on {fam.platform}"
            out.append(skipped(G, name, f"not installed ({lacking}); {why}", target=target))
    return out
