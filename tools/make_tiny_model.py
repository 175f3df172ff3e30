"""Build a tiny random Llama and a small BPE tokenizer that a real vLLM (CPU build) can serve.

    python tools/make_tiny_model.py OUT_DIR [--seed 0]

Run it with an interpreter that has ``torch``, ``transformers`` and ``tokenizers`` (the vLLM venv that
``.ci/slow`` creates). Nothing is downloaded: the weights are random and the tokenizer is trained here on
synthetic text. The output is deterministic for a given seed and library versions, so a second run over an
existing directory with the same fingerprint does nothing.

Shape (REFERENCE.md section 7): hidden 256, 4 attention heads of 64 dims (the CPU attention kernels reject
head_dim 16), 2 KV heads, 2 layers, 4,096 positions.

The tokenizer is byte-level BPE trained on text made of ``infctl.tokens``' word list, so every such word
(with its leading space) is exactly one token: a prompt of N words from that list is N prompt tokens on the
real engine too, which is what the simulator, the benchmark and the router's approximate prefix index
assume. No BOS token is added, for the same reason.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

# infctl.tokens is plain Python (no dependencies), so the engine's venv can import it from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from infctl.tokens import _WORDS as WORDS

HIDDEN = 256
HEADS = 4
KV_HEADS = 2
LAYERS = 2
INTERMEDIATE = 512
MAX_POSITIONS = 4096
VOCAB = 1024
SPECIAL = ("<s>", "</s>", "<unk>")
FINGERPRINT_FILE = "infctl-tiny-model.json"
CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
"""Messages' contents joined by spaces: /v1/chat/completions works, and a chat prompt of N words from the
list is N tokens, as with completions."""


def synthetic_corpus(seed: int, lines: int = 4000) -> list[str]:
    """Lines of the shared words plus random letter strings (so BPE also learns sub-word merges)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = []
    for _ in range(lines):
        words = [
            rng.choice(WORDS) if rng.random() < 0.8 else "".join(rng.choices(letters, k=rng.randint(2, 7)))
            for _ in range(rng.randint(8, 40))
        ]
        out.append(" ".join(words))
    return out


def build_tokenizer(seed: int):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    # No initial byte alphabet: only ASCII is ever seen, so a random model cannot emit half a UTF-8 character.
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=list(SPECIAL), show_progress=False)
    tok.train_from_iterator(synthetic_corpus(seed), trainer=trainer)
    return tok


def fingerprint(seed: int) -> dict[str, object]:
    import tokenizers
    import torch
    import transformers

    return {
        "seed": seed,
        "shape": [HIDDEN, HEADS, KV_HEADS, LAYERS, INTERMEDIATE, MAX_POSITIONS, VOCAB],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "script": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
    }


def build(out: Path, seed: int) -> bool:
    """Write the model to ``out``; False when an identical build is already there."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    stamp = fingerprint(seed)
    marker = out / FINGERPRINT_FILE
    if marker.exists() and json.loads(marker.read_text()) == stamp:
        return False
    out.mkdir(parents=True, exist_ok=True)
    raw = build_tokenizer(seed)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="</s>"
    )
    tokenizer.model_max_length = MAX_POSITIONS
    tokenizer.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    marker.write_text(json.dumps(stamp, indent=1) + "\n")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to write (created)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    built = build(args.out, args.seed)
    print(f"{'built' if built else 'up to date'}: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
