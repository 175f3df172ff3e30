from hypothesis import given
from hypothesis import strategies as st

from infctl.router.health import (
    HealthPolicy,
    HealthState,
    backoff_s,
    on_failure,
    on_probe_success,
    on_request_success,
)

POLICY = HealthPolicy(failures_to_eject=3, base_backoff_s=1.0, max_backoff_s=8.0, stable_after_s=60.0)


def test_non_fatal_failures_eject_only_at_the_limit() -> None:
    s = HealthState()
    s = on_failure(s, POLICY, 100.0, fatal=False, error="HTTP 503")
    s = on_failure(s, POLICY, 100.1, fatal=False, error="HTTP 503")
    assert not s.ejected
    s = on_failure(s, POLICY, 100.2, fatal=False, error="HTTP 503")
    assert s.ejected and s.ejected_until == 101.2 and s.total_ejections == 1


def test_request_success_breaks_the_streak() -> None:
    s = HealthState()
    s = on_failure(s, POLICY, 100.0, fatal=False, error="x")
    s = on_failure(s, POLICY, 100.0, fatal=False, error="x")
    s = on_request_success(s)
    s = on_failure(s, POLICY, 100.0, fatal=False, error="x")
    assert not s.ejected


def test_fatal_failure_ejects_at_once_and_probe_readmits_after_backoff() -> None:
    s = on_failure(HealthState(), POLICY, 100.0, fatal=True, error="connection refused")
    assert s.ejected
    assert on_probe_success(s, 100.5).ejected, "re-admitted before the backoff passed"
    s = on_probe_success(s, 101.0)
    assert not s.ejected and s.admitted_at == 101.0 and s.last_error is None


def test_backoff_doubles_while_flapping_and_resets_when_stable() -> None:
    s = HealthState()
    t = 100.0
    waits = []
    for _ in range(5):
        s = on_failure(s, POLICY, t, fatal=True, error="x")
        assert s.ejected_until is not None
        waits.append(s.ejected_until - t)
        t = s.ejected_until
        s = on_probe_success(s, t)
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0]
    s = on_failure(s, POLICY, t + 61.0, fatal=True, error="x")
    assert s.ejected_until == t + 62.0


@given(st.integers(min_value=1, max_value=50))
def test_backoff_bounded(n: int) -> None:
    assert POLICY.base_backoff_s <= backoff_s(POLICY, n) <= POLICY.max_backoff_s


@given(st.lists(st.tuples(st.sampled_from(["fail", "fatal", "ok", "probe"]), st.floats(0, 5)), max_size=60))
def test_never_readmitted_by_requests_and_never_before_backoff(ops: list[tuple[str, float]]) -> None:
    s, now = HealthState(), 0.0
    for op, dt in ops:
        now += dt
        before = s
        if op == "fail":
            s = on_failure(s, POLICY, now, fatal=False, error="x")
        elif op == "fatal":
            s = on_failure(s, POLICY, now, fatal=True, error="x")
        elif op == "ok":
            s = on_request_success(s)
            assert s.ejected == before.ejected
        else:
            s = on_probe_success(s, now)
            if before.ejected and not s.ejected:
                assert before.ejected_until is not None and now >= before.ejected_until
