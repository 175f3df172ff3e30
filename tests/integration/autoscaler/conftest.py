"""Puts tests/integration on sys.path so this folder's tests import the local-target helpers
(``from localkit import ...``) rather than copying them."""

from __future__ import annotations

import sys
from pathlib import Path

_INTEGRATION = str(Path(__file__).resolve().parent.parent)
if _INTEGRATION not in sys.path:
    sys.path.insert(0, _INTEGRATION)
