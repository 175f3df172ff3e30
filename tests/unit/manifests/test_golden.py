"""Every shipped Kubernetes profile renders, validates, and matches its golden files.

Regenerate after an intended change with ``INFCTL_UPDATE_GOLDEN=1 pytest tests/unit/manifests/test_golden.py``
and review the diff of ``tests/golden/``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infctl.config import DeploymentProfile, load_deployment
from infctl.manifests import render, validate_objects, write_files

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden"
UPDATE = os.environ.get("INFCTL_UPDATE_GOLDEN") == "1"


def kubernetes_profiles() -> list[Path]:
    found = []
    for path in sorted((ROOT / "profiles").glob("*.yaml")):
        if "target: kubernetes" in path.read_text():
            found.append(path)
    return found


PROFILES = kubernetes_profiles()


def test_every_kubernetes_profile_has_goldens() -> None:
    assert {p.stem for p in PROFILES} == {d.name for d in GOLDEN.iterdir() if d.is_dir()}
    assert len(PROFILES) >= 3


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_matches_golden_files(path: Path, tmp_path: Path) -> None:
    objects = render(load_deployment(path))
    target = GOLDEN / path.stem
    if UPDATE:
        for old in target.glob("*.yaml"):
            old.unlink()
        write_files(objects, target)
    write_files(objects, tmp_path)
    got = {p.name: p.read_text() for p in tmp_path.glob("*.yaml")}
    want = {p.name: p.read_text() for p in target.glob("*.yaml")}
    assert sorted(got) == sorted(want), (
        "objects added or removed: rerun with INFCTL_UPDATE_GOLDEN=1 and review"
    )
    for name in sorted(got):
        assert got[name] == want[name], (
            f"{path.stem}/{name} differs: rerun with INFCTL_UPDATE_GOLDEN=1 and review"
        )


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_validates_against_schemas(path: Path) -> None:
    assert validate_objects(render(load_deployment(path)), "1.31") == []


def _profile(stem: str, *overrides: str) -> DeploymentProfile:
    return load_deployment(ROOT / "profiles" / f"{stem}.yaml", list(overrides))
