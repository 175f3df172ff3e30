"""The simulated engine core: vLLM v1's continuous-batching scheduler over a KV block pool, on a given clock.

Pure: no asyncio and no wall clock; drivers pass ``now`` and wait ``StepOutput.duration`` before delivering
a step's outputs (see ``infctl.sim.types``). This module decides who runs and how many tokens each computes;
the blocks, the prefix cache and the offload tier are ``infctl.sim.kv_manager.KVManager``'s. One step:

1. **Running requests first**, in admission order: a decoding sequence costs 1 token of the step's budget
   (``max_num_batched_tokens``), a request mid-prefill takes ``min(remaining, budget)`` (chunked prefill).
   A request that needs a new block when none is free preempts the most recently admitted running request
   (recompute mode: its blocks are freed, it goes back to the front of the queue, its generated tokens are
   kept and recomputed as prefill on readmission), possibly itself.
2. **Then the FCFS queue**, unless something was preempted in this step: remote-KV arrivals first, then the
   queue's head while budget, ``max_num_seqs`` and free blocks allow. Admission looks up the longest cached
   prefix, never the whole sequence: at least the last token is recomputed, as in vLLM.
   A scheduled request's full blocks (those its tokens of this step complete) are cached as it is
   scheduled, as vLLM's ``KVCacheManager.allocate_slots`` caches them when it allocates: a request admitted
   later in the same step hits them (the sequences of an ``n`` > 1 request, identical prompts of a batch).
3. **Execute**: duration from the profile's step-time model (given each prefill chunk's tokens and prefix
   when the profile prices them, ``SimProfile.uses_prefill_chunks``); a chunk that completes the known
   tokens emits one token; finished requests free their blocks (their full blocks stay cached).

Counting conventions (what the personalities turn into metrics):

* ``prefix_queries``/``prefix_hits`` count tokens, once per request at its first admission: queries += prompt
  length, hits += tokens served from the local cache. Readmissions after preemption are not counted again.
* ``TokenEvent.cached_tokens`` (first token only) is the local prefix hit at first admission; for a remote
  prefill it is the whole prompt (its KV arrived from the prefill engine).
* Remote prefill (``SimRequest.remote_prefill`` on a "decode" or "both" core): blocks for the whole prompt
  are allocated FCFS (at ``add_request`` if nothing is queued, else when it reaches the queue's head);
  only the tokens missing from the local cache are transferred, taking ``tokens * kv_bytes_per_token /
  (kv_transfer_gbps * 1e9)`` seconds from allocation. The request then joins the batch as a decoding
  sequence; its first step emits the first token.
* Offload tier (``offload=OffloadTier(...)``, see ``infctl.sim.offload``): admission looks up HBM, then the
  tier for the blocks that follow the HBM hit. A tier hit allocates blocks for the hit plus a first chunk and
  parks the request with the remote-KV arrivals until the tier's copy is done; it then prefills the rest.
  Its tokens count in ``TokenEvent.cached_tokens`` but not in ``prefix_hits`` (HBM only, as vLLM's local
  prefix cache); ``CoreStats.tier`` counts them. Computed full blocks (write-through) or blocks HBM evicts
  (write-back) are copied to the tier at the end of the step. Remote-prefill requests skip the tier.
* ``abort`` frees the request's blocks at once; the next step reports ``TokenEvent(finished=True,
  finish_reason="abort")``. A request whose prompt plus output can never fit the pool is reported by the next
  step with ``finish_reason="error"``. Such steps may have ``duration == 0``: deliver their events anyway.
* A step that ran nothing has ``duration == 0`` and no events. Then ``next_ready_time()`` is the earliest
  remote-KV arrival to sleep until (or until a new request); None means step again (rare: a step that
  only preempted) or, when ``has_work()`` is False, wait for a request.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from infctl.sim.kv_manager import KVManager, Plan, RequestState
from infctl.sim.kvcache import BlockPool
from infctl.sim.offload import HostTier, OffloadTier
from infctl.sim.profiles import SimProfile
from infctl.sim.types import CoreStats, SimRequest, StepOutput, TokenEvent

Role = Literal["prefill", "decode", "both"]


class EngineCore:
    """One simulated engine: submit requests, call ``step(now)`` while ``has_work()``."""

    def __init__(
        self,
        profile: SimProfile,
        *,
        role: Role = "both",
        kv_events: bool = False,
        hash_seed: str | None = None,
        offload: OffloadTier | None = None,
    ) -> None:
        self.profile = profile
        self.role = role
        self._kv = kv = KVManager(profile, kv_events=kv_events, hash_seed=hash_seed, offload=offload)
        self._pool = kv.pool
        self._tier = kv.tier
        self._bs = profile.block_size
        self._transfer_bytes_per_s = profile.kv_transfer_gbps * 1e9
        self._per_chunk = profile.uses_prefill_chunks
        """Pass each prefill chunk's (tokens, prefix) to ``step_time`` (only profiles that price them)."""
        self._running: list[RequestState] = []
        self._waiting: deque[RequestState] = deque()
        self._transferring: list[RequestState] = []
        """Waiting for KV from a prefill engine or the offload tier."""
        self._requests: dict[str, RequestState] = {}
        self._early: list[TokenEvent] = []
        """Aborts and errors, reported by the next step."""
        self._queries = self._hits = self._prompt_tokens = self._generated = self._preemptions = 0
        self._prompt_local = self._prompt_external = 0
        """Prompt tokens counted with ``_prompt_tokens`` that HBM's cache / an external source supplied."""
        self._now = 0.0
        """Start of the current (last) step: when the tier's copies are judged ready."""

    @property
    def pool(self) -> BlockPool:
        """The KV block pool (read it; do not change it)."""
        return self._pool

    @property
    def tier(self) -> HostTier | None:
        """The offload tier, if any (read it; do not change it)."""
        return self._tier

    # -- requests --------------------------------------------------------------------------------

    def add_request(self, req: SimRequest, now: float) -> None:
        """Queue ``req``; raises ValueError for a duplicate id or lengths the server should have refused."""
        n_prompt = len(req.prompt_ids)
        if req.request_id in self._requests:
            raise ValueError(f"request {req.request_id!r} is already active")
        if n_prompt < 1 or req.max_tokens < 1:
            raise ValueError(f"request {req.request_id!r}: empty prompt or max_tokens < 1")
        if n_prompt + req.max_tokens > self.profile.max_model_len:
            raise ValueError(
                f"request {req.request_id!r}: {n_prompt} prompt + {req.max_tokens} output tokens "
                f"exceed max_model_len {self.profile.max_model_len}"
            )
        # The last generated token's KV is never computed.
        if -(-(n_prompt + req.max_tokens - 1) // self._bs) > self.profile.num_gpu_blocks:
            self._early.append(TokenEvent(req.request_id, 0, True, "error"))
            return
        r = RequestState(req, remote=req.remote_prefill and self.role != "prefill")
        self._requests[r.rid] = r
        if r.remote and not self._waiting and self._start_transfer(r, now):
            return
        self._waiting.append(r)

    def abort(self, request_id: str) -> None:
        """Drop a request and free its blocks now; the next step reports it finished with "abort"."""
        r = self._requests.pop(request_id, None)
        if r is None:
            return
        for queue in (self._running, self._transferring, self._waiting):
            if r in queue:
                queue.remove(r)
                break
        self._kv.free(r)
        r.done = True
        self._early.append(TokenEvent(request_id, 0, True, "abort"))

    def has_work(self) -> bool:
        return bool(self._running or self._waiting or self._transferring or self._early)

    def next_ready_time(self) -> float | None:
        """When nothing can run before some remote KV arrives: the earliest arrival; else None.

        None means "step now" (there is runnable work) or "nothing to wait for" (see ``has_work``).
        A float may be in the past; a driver waits until it (or until a new request arrives), then steps.
        """
        if self._running or self._early or not self._transferring:
            return None
        if self._waiting and self._plan(self._waiting[0], self.profile.max_num_batched_tokens) is not None:
            return None
        return min(r.ready_at for r in self._transferring)

    def reset_prefix_cache(self) -> bool:
        """Forget all cached prefixes, the tier's too; refused (False) while any request holds blocks."""
        return self._kv.reset_prefix_cache()

    def stats(self) -> CoreStats:
        pool = self._pool
        return CoreStats(
            running=len(self._running),
            waiting=len(self._waiting) + len(self._transferring),
            kv_usage=pool.used / pool.num_blocks,
            num_gpu_blocks=pool.num_blocks,
            block_size=self._bs,
            used_blocks=pool.used,
            prefix_queries=self._queries,
            prefix_hits=self._hits,
            prompt_tokens=self._prompt_tokens,
            prompt_local_hits=self._prompt_local,
            prompt_external=self._prompt_external,
            generation_tokens=self._generated,
            preemptions=self._preemptions,
            tier=None if self._tier is None else self._tier.stats(),
        )

    def block_tables(self) -> dict[str, list[int]]:
        """Blocks held by each active request (for tests and inspection)."""
        return {rid: list(r.blocks) for rid, r in self._requests.items() if r.blocks}

    # -- the step --------------------------------------------------------------------------------

    def step(self, now: float) -> StepOutput:
        """Schedule and execute one step starting at ``now``; its outputs are due at ``now + duration``."""
        self._now = now
        bs = self._bs
        pool = self._pool
        running = self._running
        budget = self.profile.max_num_batched_tokens
        sched: list[RequestState] = []
        n_sched: list[int] = []
        preempted: list[str] = []

        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            n_new = r.prompt_len + r.n_out - r.n_computed
            if n_new > budget:
                n_new = budget
            need = (r.n_computed + n_new + bs - 1) // bs - len(r.blocks)
            if need > 0:
                if not self._make_room(r, need, preempted):
                    break
                r.blocks += pool.allocate(need)
            self._schedule(r, n_new, sched, n_sched)
            budget -= n_new
            i += 1
        if not preempted:
            self._admit(now, budget, sched, n_sched)
        return self._execute(now, sched, n_sched, preempted)

    def _make_room(self, r: RequestState, need: int, preempted: list[str]) -> bool:
        """Preempt from the back of the running list until ``need`` blocks are free; False if ``r`` went."""
        while self._pool.num_free < need:
            victim = self._running.pop()
            self._kv.free(victim)
            victim.n_computed = victim.n_cached = 0
            self._waiting.appendleft(victim)
            self._preemptions += 1
            preempted.append(victim.rid)
            if victim is r:
                return False
        return True

    def _admit(self, now: float, budget: int, sched: list[RequestState], n_sched: list[int]) -> None:
        running = self._running
        max_seqs = self.profile.max_num_seqs
        if self._transferring:
            # Arrived remote KV goes first, as vLLM puts finished receives back at the queue's front.
            pending: list[RequestState] = []
            for r in self._transferring:
                if r.ready_at <= now and budget > 0 and len(running) < max_seqs:
                    # A remote prefill has one token left (its first decode input); a tier load has the rest
                    # of its prompt, of which its blocks cover a first chunk.
                    n_new = min(r.prompt_len + r.n_out, len(r.blocks) * self._bs) - r.n_computed
                    if n_new > budget:
                        n_new = budget
                    if r.remote:
                        r.remote = False
                        r.decoding = True
                    running.append(r)
                    self._schedule(r, n_new, sched, n_sched)
                    budget -= n_new
                else:
                    pending.append(r)
            self._transferring = pending
        waiting = self._waiting
        while waiting and budget > 0 and len(running) < max_seqs:
            r = waiting[0]
            if r.remote:
                if not self._start_transfer(r, now):
                    break
                waiting.popleft()
                continue
            plan = self._plan(r, budget)
            if plan is None:
                break
            waiting.popleft()
            hit_tokens = self._take(r, *plan)
            if plan[2]:
                self._start_load(r, len(plan[0]), plan[2], now)
                continue
            running.append(r)
            self._schedule(r, plan[1] - hit_tokens, sched, n_sched)
            budget -= plan[1] - hit_tokens

    def _schedule(self, r: RequestState, n_new: int, sched: list[RequestState], n_sched: list[int]) -> None:
        """Run ``n_new`` tokens of ``r`` this step; the full blocks they complete are cached now. vLLM caches
        a request's blocks up to ``num_computed_tokens + num_new_tokens`` as it allocates them
        (v1/core/kv_cache_manager.py ``allocate_slots``, 0.32), before the step runs: seen on vLLM 0.32 (CPU),
        the 2nd and 3rd sequences of an ``n: 3`` request on a 300-token prompt hit 256 tokens each."""
        sched.append(r)
        n_sched.append(n_new)
        if self._kv.caching and (r.n_computed + n_new) // self._bs > r.n_cached:
            self._kv.cache_full_blocks(r, r.n_computed + n_new)

    def _plan(self, r: RequestState, budget: int) -> Plan | None:
        """``KVManager.plan``, the tier's copies judged ready or not at the current step's start."""
        return self._kv.plan(r, budget, self._now)

    def _take(self, r: RequestState, hits: list[int], covered: int, n_tier: int) -> int:
        """Give ``r`` its blocks (see ``KVManager.take``) and count its prefix hit at first admission."""
        hit_tokens = self._kv.take(r, hits, covered)
        if r.cached_tokens < 0:
            r.cached_tokens = hit_tokens + n_tier * self._bs
            r.local_hit, r.external = hit_tokens, n_tier * self._bs
            self._queries += r.prompt_len
            self._hits += hit_tokens
            if self._tier is not None and not r.remote:
                self._tier.query_tokens += r.prompt_len - hit_tokens
                self._tier.hit_tokens += n_tier * self._bs
        return hit_tokens

    def _start_load(self, r: RequestState, first: int, n_blocks: int, now: float) -> None:
        """Copy blocks ``first..first+n_blocks`` of ``r`` from the tier; ``r`` waits with the transfers."""
        self._kv.load(r, first, n_blocks, now)
        self._transferring.append(r)

    def _start_transfer(self, r: RequestState, now: float) -> bool:
        plan = self._plan(r, 0)
        if plan is None:
            return False
        hit_tokens = self._take(r, *plan)
        r.cached_tokens = r.prompt_len
        r.external = r.prompt_len - 1 - hit_tokens  # all but the recomputed last token (below)
        transfer_bytes = (r.prompt_len - hit_tokens) * self.profile.kv_bytes_per_token
        r.ready_at = now + transfer_bytes / (r.link_bps or self._transfer_bytes_per_s)
        # vLLM recomputes the last prompt token after a remote load; it is the first decode step's input.
        r.n_computed = r.prompt_len - 1
        self._transferring.append(r)
        return True

    def _execute(
        self, now: float, sched: list[RequestState], n_sched: list[int], preempted: list[str]
    ) -> StepOutput:
        kv = self._kv
        events = self._early
        self._early = []
        prefill = decode = context = generated = 0
        chunks: list[tuple[int, int]] | None = [] if self._per_chunk else None
        finished = False
        for r, n_new in zip(sched, n_sched, strict=True):
            n_tokens = r.prompt_len + r.n_out
            if n_new == 1 and r.decoding:
                decode += 1
                context += n_tokens
            else:
                prefill += n_new
                if chunks is not None:
                    chunks.append((n_new, r.n_computed))
            r.n_computed += n_new
            if r.n_computed < n_tokens:
                events.append(TokenEvent(r.rid, 0, False))
                continue
            r.n_out += 1
            generated += 1
            cached = 0
            if r.n_out == 1:
                r.decoding = True
                cached = r.cached_tokens
                self._prompt_tokens += r.prompt_len
                self._prompt_local += r.local_hit
                self._prompt_external += r.external
            if r.n_out >= r.max_tokens:
                events.append(TokenEvent(r.rid, 1, True, "length", cached))
                kv.free(r)
                r.done = True
                del self._requests[r.rid]
                finished = True
            else:
                events.append(TokenEvent(r.rid, 1, False, None, cached))
        self._generated += generated
        if finished:
            self._running = [r for r in self._running if not r.done]
        duration = self.profile.step_time(prefill, decode, context, chunks) if sched else 0.0
        return StepOutput(
            duration=duration,
            events=events,
            prefill_tokens=prefill,
            decode_seqs=decode,
            preempted=preempted,
            kv_events=kv.end_step(now, now + duration),
        )
