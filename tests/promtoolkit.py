"""``promtool test rules`` for the tests that evaluate rendered or built PromQL (alert rules, queue sums).

Imported by name (``from promtoolkit import PROMTOOL, promtool_test``): pytest puts tests/ on sys.path for the
root conftest.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

PROMTOOL = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed (Debian: apt-get install -y prometheus)",
)


def promtool_test(tmp_path: Path, *cases: dict[str, Any]) -> None:
    """Run ``cases`` (``input_series`` and ``alert_rule_test`` or ``promql_expr_test``, evaluated every
    minute) against ``tmp_path``/rules.yaml, which the caller has written; every check must pass."""
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": list(cases)}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    done = subprocess.run(
        ["promtool", "test", "rules", "tests.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
