"""Offline schema checks of rendered objects.

Core kinds go through ``kubernetes-validate`` (strict: unknown fields are errors) for a chosen Kubernetes
version; custom kinds through the ``openAPIV3Schema`` of the trimmed CRDs in ``crds/``, read as closed
schemas (an undescribed field is an error, as with the API server's strict field validation). Pod templates
embedded in custom kinds are checked as core ``PodTemplate`` objects.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from infctl.errors import ConfigError
from infctl.manifests.kinds import kind_of

DEFAULT_K8S_VERSION = "1.31"
EMBEDDED_POD_TEMPLATES: dict[str, tuple[tuple[str, ...], ...]] = {
    "LeaderWorkerSet": (
        ("spec", "leaderWorkerTemplate", "leaderTemplate"),
        ("spec", "leaderWorkerTemplate", "workerTemplate"),
    ),
}


def crds_dir() -> Path:
    """``$INFCTL_CRDS``, else ``crds/`` beside the package."""
    env = os.environ.get("INFCTL_CRDS")
    here = Path(__file__).resolve().parent
    for path in [*([Path(env)] if env else []), here.parent.parent / "crds", here.parent / "_crds"]:
        if path.is_dir():
            return path
    raise ConfigError("cannot find infctl's CRD schemas (crds/)", hint="set INFCTL_CRDS to the crds/ folder")


@cache
def crd_schemas(directory: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> JSON Schema, from every CustomResourceDefinition under ``directory``."""
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(directory.glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            spec = crd["spec"]
            for version in spec["versions"]:
                key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                schemas[key] = to_json_schema(version["schema"]["openAPIV3Schema"])
    return schemas


def to_json_schema(node: Any) -> Any:
    """An openAPIV3Schema node as JSON Schema: int-or-string spelled out, described objects closed."""
    if not isinstance(node, dict):
        return node
    if node.get("x-kubernetes-int-or-string"):
        return {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    out = {
        k: to_json_schema(v) if k in ("items", "additionalProperties") else v
        for k, v in node.items()
        if not k.startswith("x-kubernetes-") and k != "properties"
    }
    if "properties" in node:
        out["properties"] = {k: to_json_schema(v) for k, v in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            out.setdefault("additionalProperties", False)
    return out


def validate_objects(objects: Iterable[dict[str, Any]], k8s_version: str = DEFAULT_K8S_VERSION) -> list[str]:
    """Every schema problem, one line each: ``Kind/name: path: message``. Empty when all objects are valid."""
    _check_version(k8s_version)
    problems: list[str] = []
    for obj in objects:
        where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        kind = kind_of(obj)
        if kind.crd is None:
            problems += [f"{where}: {p}" for p in _core(obj, k8s_version)]
            continue
        problems += [f"{where}: {p}" for p in _custom(obj)]
        for path in EMBEDDED_POD_TEMPLATES.get(kind.kind, ()):
            template = _at(obj, path)
            if template is not None:
                pod = {
                    "apiVersion": "v1",
                    "kind": "PodTemplate",
                    "metadata": {"name": "embedded"},
                    "template": template,
                }
                problems += [f"{where}: {'.'.join(path)}.{p}" for p in _core(pod, k8s_version, skip=1)]
    return problems


def _check_version(version: str) -> None:
    known = sorted(
        {".".join(v.split(".")[:2]) for v in _kv().utils.all_versions()},
        key=lambda v: tuple(map(int, v.split("."))),
    )
    parts = version.split(".")
    if len(parts) < 2 or ".".join(parts[:2]) not in known:
        raise ConfigError(
            f"--k8s-version {version}: no schemas for that version",
            hint=f"use one of {known[0]} .. {known[-1]}, e.g. {DEFAULT_K8S_VERSION}",
        )


def _core(obj: dict[str, Any], version: str, skip: int = 0) -> list[str]:
    import jsonschema  # type: ignore[import-untyped]

    kubernetes_validate = _kv()
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except jsonschema.ValidationError as err:
        return [_line(err.absolute_path, err.message, skip)]
    except (
        kubernetes_validate.utils.VersionNotSupportedError,
        kubernetes_validate.utils.SchemaNotFoundError,
    ) as err:
        raise ConfigError(
            f"--k8s-version {version}: {err}",
            hint=f"use a version kubernetes-validate knows, e.g. {DEFAULT_K8S_VERSION}",
        ) from None
    return []


def _kv() -> Any:
    """kubernetes-validate, imported on first use (it loads slowly and only --validate needs it)."""
    try:
        import kubernetes_validate  # type: ignore[import-untyped]
    except ImportError:
        raise ConfigError(
            "--validate needs the kubernetes-validate package", hint="pip install kubernetes-validate"
        ) from None
    return kubernetes_validate


def _custom(obj: dict[str, Any]) -> list[str]:
    import jsonschema

    schema = crd_schemas(crds_dir()).get((obj["apiVersion"], obj["kind"]))
    if schema is None:
        return [f"no CRD schema for {obj['apiVersion']} {obj['kind']} under {crds_dir()}"]
    validator = jsonschema.Draft7Validator(schema)
    return [
        _line(e.absolute_path, e.message)
        for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    ]


def _line(path: Sequence[Any], message: str, skip: int = 0) -> str:
    parts = list(path)[skip:]
    text = ""
    for p in parts:
        text += f"[{p}]" if isinstance(p, int) else (f".{p}" if text else str(p))
    return f"{text or '(root)'}: {message}"


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj
