"""``dp_attention``'s field doc (also ``--set`` help) and the shipped SGLang DP-attention profile name both
spellings SGLang takes (8ca392b): ``--enable-dp-attention`` up to 0.5.21, ``--attn-dp-size N`` from 0.5.22.
They named the old one only."""

from __future__ import annotations

from pathlib import Path

from infctl.config import ModelProfile
from infctl.engines.sglang_launch import DP_ATTENTION_FLAG, RENAMED_FLAGS

PROFILE = Path(__file__).resolve().parents[3] / "profiles" / "models" / "deepseek-v3-sglang.yaml"


def test_the_field_doc_and_the_profile_name_both_spellings() -> None:
    new, since = RENAMED_FLAGS[DP_ATTENTION_FLAG]
    release = ".".join(map(str, since))
    doc = " ".join((ModelProfile.model_fields["dp_attention"].description or "").split())
    assert DP_ATTENTION_FLAG in doc and f"{new} N" in doc and release in doc
    text = PROFILE.read_text()
    assert DP_ATTENTION_FLAG in text and new in text and release in text
