"""Token ids of each request's prompt, made when it is sent (never all at once: a trace's prompts hold ~60M).

Any workload's prompt text is tokenized under the convention of :mod:`infctl.tokens`, exactly as the
simulated engine tokenizes what ``infctl bench`` sends it. A Mooncake trace takes a shortcut with the same
sharing structure: each hash id's block is a run of consecutive ids unique to that hash id (its text would
cost a word and a CRC per token), so equal hash-id prefixes are equal token prefixes, as with the text.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from infctl.bench.workloads import TraceWorkload, Workload
from infctl.bench.workloads.base import RequestSpec, overhead
from infctl.bench.workloads.mooncake import TraceEntry
from infctl.sim.kvcache import chain_hash, root_hash
from infctl.tokens import block_hashes, chat_prompt_text, token_ids

_ID_SPACE = 1 << 32
"""Token ids are packed as uint32 by the block hashes."""
_MEMO_ENTRIES = 200_000
"""Trace blocks whose router hashes are remembered (each holds block_tokens / block_size hashes)."""
_USER, _ASSISTANT = zlib.crc32(b"<|user|>"), zlib.crc32(b"<|assistant|>")


class PromptSource:
    """A workload's requests (``specs``) and, for each, its prompt's token ids (``ids``)."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload

    def specs(self) -> Iterator[RequestSpec]:
        return self.workload.requests()

    def ids(self, spec: RequestSpec) -> list[int]:
        if spec.prompt is not None:
            return token_ids(spec.prompt)
        return token_ids(chat_prompt_text(spec.messages or ()))

    def hashes(self, spec: RequestSpec, ids: list[int], block_size: int, seed: str) -> tuple[int, ...]:
        """The router's block hashes of the prompt (``infctl.tokens.block_hashes``)."""
        return tuple(block_hashes(ids, block_size, seed))


class TracePrompts(PromptSource):
    """A Mooncake trace without its text: specs carry no prompt, ``ids`` builds the ids from hash ids."""

    def __init__(self, trace: TraceWorkload) -> None:
        super().__init__(trace)
        self.trace = trace
        self._by_line: dict[int, TraceEntry] = {e.line: e for e in trace.entries}
        self._memo: dict[tuple[int, int, int], list[int]] = {}
        """(parent hash, hash id, block size) -> the router's block hashes of that trace block: shared
        prefixes are hashed once, not once per request."""

    def specs(self) -> Iterator[RequestSpec]:
        """The trace's requests as ``TraceWorkload.requests`` makes them, less the prompt text (the same
        lengths, output caps and compressed timestamps); ``group`` is the trace line."""
        t, spec = self.trace, self.trace.spec
        start = t.entries[0].timestamp_ms
        for e in t.entries:
            out = max(1, round(e.output_length * spec.output_scale))
            if spec.max_output_tokens:
                out = min(out, spec.max_output_tokens)
            at = (e.timestamp_ms - start) / 1000.0 / spec.time_compression
            yield RequestSpec(input_tokens=t.input_tokens(e), max_tokens=out, at_s=at, group=e.line)

    def ids(self, spec: RequestSpec) -> list[int]:
        assert spec.group is not None
        e = self._by_line[spec.group]
        t = self.trace
        chat = overhead(t.api) > 0
        budget = max(1, spec.input_tokens - overhead(t.api))
        bt = t.block_tokens
        offset = t.seed * 1_000_003
        out: list[int] = [_USER] if chat else []
        for h in e.hash_ids:
            take = min(bt, budget)
            base = ((offset + h) * bt) % _ID_SPACE
            if base + take <= _ID_SPACE:
                out += range(base, base + take)
            else:
                out += [(base + i) % _ID_SPACE for i in range(take)]
            budget -= take
            if budget <= 0:
                break
        if chat:
            out.append(_ASSISTANT)
        return out

    def hashes(self, spec: RequestSpec, ids: list[int], block_size: int, seed: str) -> tuple[int, ...]:
        bt = self.trace.block_tokens
        if overhead(self.trace.api) or bt % block_size:
            return super().hashes(spec, ids, block_size, seed)
        assert spec.group is not None
        hash_ids = self._by_line[spec.group].hash_ids
        memo = self._memo
        if len(memo) > _MEMO_ENTRIES:
            memo.clear()
        parent = root_hash(seed)
        out: list[int] = []
        n_full = len(ids) // block_size
        per = bt // block_size
        for k, h in enumerate(hash_ids):
            lo = k * per
            if lo >= n_full:
                break
            key = (parent, h, block_size)
            chunk = memo.get(key) if lo + per <= n_full else None
            if chunk is None:
                chunk = []
                p = parent
                for j in range(lo, min(lo + per, n_full)):
                    p = chain_hash(p, ids[j * block_size : (j + 1) * block_size])
                    chunk.append(p)
                if len(chunk) == per:
                    memo[key] = chunk
            out += chunk
            parent = chunk[-1]
        return tuple(out)


def prompt_source(workload: Workload) -> PromptSource:
    """The fast source for a trace, the text one for everything else."""
    if isinstance(workload, TraceWorkload):
        return TracePrompts(workload)
    return PromptSource(workload)
