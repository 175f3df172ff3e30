"""The admin token in rendered releases: one Secret, loaded without ``optional``, never rendered itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infctl.config import load_deployment
from infctl.manifests import RenderOptions, render
from infctl.manifests.admin_secret import (
    ADMIN_TOKEN_ENV,
    AdminSecretRef,
    admin_secret_ref,
    render_note,
    secret_object,
)

ROOT = Path(__file__).resolve().parents[3]
KIMI = ROOT / "profiles" / "kimi-k2-pool.yaml"  # router and autoscaler


def objects(*overrides: str, **options: Any) -> list[dict[str, Any]]:
    return render(load_deployment(KIMI, list(overrides)), RenderOptions(**options))


def token_env(objs: list[dict[str, Any]], component: str) -> list[dict[str, Any]]:
    (deployment,) = [o for o in objs if o["kind"] == "Deployment"
                     and o["metadata"]["labels"]["app.kubernetes.io/component"] == component]  # fmt: skip
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return [e for e in container.get("env", []) if e["name"] == ADMIN_TOKEN_ENV]


def test_router_and_autoscaler_load_the_token_from_one_required_secret() -> None:
    objs = objects()
    ref = {"name": "kimi-k2-router-admin", "key": "token"}
    for component in ("router", "autoscaler"):
        (env,) = token_env(objs, component)
        assert env["valueFrom"]["secretKeyRef"] == ref  # no optional: a missing Secret stops the pod
    (config,) = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "kimi-k2-router"]
    assert f"admin_token_env: {ADMIN_TOKEN_ENV}" in config["data"]["router.yaml"]
    assert admin_secret_ref(objs) == AdminSecretRef("kimi-k2-router-admin", "inference")
    assert not [o for o in objs if o["kind"] == "Secret"]


def test_a_named_secret_replaces_the_default_everywhere() -> None:
    objs = objects(admin_token_secret="shared-admin")
    for component in ("router", "autoscaler"):
        assert token_env(objs, component)[0]["valueFrom"]["secretKeyRef"]["name"] == "shared-admin"
    ref = admin_secret_ref(objs)
    assert ref == AdminSecretRef("shared-admin", "inference", named=True)
    assert "never creates a named Secret" in render_note(ref)


def test_without_a_router_nothing_reads_a_token() -> None:
    objs = objects("router.enabled=false", inference_pool_epp="kimi-epp")
    assert admin_secret_ref(objs) is None
    assert token_env(objs, "autoscaler") == []


def test_operator_commands_and_note() -> None:
    ref = AdminSecretRef("r-router-admin", "prod")
    assert ref.read_command() == (
        "kubectl get secret r-router-admin -n prod -o jsonpath='{.data.token}' | base64 -d"
    )
    assert ref.create_command().startswith(
        "kubectl create secret generic r-router-admin -n prod --from-literal=token="
    )
    note = render_note(ref)
    assert "creates it when missing" in note and "never creates" not in note
    assert all(line.startswith("# ") for line in note.splitlines())
    assert ref.create_command() in note and ref.read_command() in note
    body = secret_object(ref, {"a": "b"}, "t0k")
    assert body["stringData"] == {"token": "t0k"} and body["metadata"]["namespace"] == "prod"
