"""What deploy does about the admin-token Secret (the pure decision; the I/O is in tests/integration/kube)."""

from __future__ import annotations

import pytest

from infctl.errors import KubeError
from infctl.kube.secrets import secret_action
from infctl.manifests.admin_secret import AdminSecretRef

DEFAULT = AdminSecretRef("rel-router-admin", "ns")
NAMED = AdminSecretRef("shared", "ns")


def test_a_missing_default_secret_is_created_unless_dry_run() -> None:
    assert secret_action(None, DEFAULT, "rel", "none") == "created"
    assert secret_action(None, DEFAULT, "rel", "client") == "would create"
    assert secret_action(None, DEFAULT, "rel", "server") == "would create"


def test_an_existing_secret_with_a_token_is_kept() -> None:
    for live in ({"data": {"token": "dA=="}}, {"stringData": {"token": "t"}}):
        assert secret_action(live, DEFAULT, "rel", "none") == "kept"
        assert secret_action(live, NAMED, "rel", "none") == "kept"


def test_a_secret_without_the_key_is_an_error_not_an_overwrite() -> None:
    for live in ({}, {"data": {"token": ""}}, {"data": {"other": "eA=="}}):
        with pytest.raises(KubeError, match="no 'token' key") as err:
            secret_action(live, DEFAULT, "rel", "none")
        assert err.value.hint is not None and "kubectl delete secret rel-router-admin -n ns" in err.value.hint


def test_a_named_secret_is_never_created() -> None:
    with pytest.raises(KubeError, match=r"shared.*does not exist") as err:
        secret_action(None, NAMED, "rel", "none")
    assert err.value.status == 404
    assert err.value.hint is not None and "kubectl create secret generic shared -n ns" in err.value.hint
