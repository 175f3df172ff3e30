"""The engine-name field type, apart from the model profile so that the router's file validates engine names
without building every model-profile class."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator

from infctl.config._messages import OneOf
from infctl.engines import ENGINES

_ENGINE_NAMES = OneOf(ENGINES)
EngineName = Annotated[str, _ENGINE_NAMES, BeforeValidator(_ENGINE_NAMES)]
"""An engine's name: one registered in :data:`infctl.engines.ENGINES` when the profile loads."""
