"""The HTTP clients' one retry policy (deepsearcher/retry.py): what is retried, how often, how
long it waits, and the error once the attempts are spent. The clients' own tests
(test_llm.py, test_embedding_remote.py) check the same against scripted servers."""

from __future__ import annotations

import asyncio
import logging

import pytest

from deepsearcher.retry import Backoff, Retryable, RetryPolicy, retry_log, retryable_reason


class Spent(Exception):
    pass


def _policy(attempts: int, waits: list[float]) -> RetryPolicy:
    return RetryPolicy(
        attempts=attempts,
        backoff=Backoff(base_s=0.001, cap_s=0.002, retry_after_cap_s=0.005),
        retry_on=(Retryable,),
        reason=retryable_reason,
        exhausted=lambda n, reason: Spent(f"failed after {n} attempts: {reason}"),
        log=lambda reason, n, delay: waits.append(delay),
    )


def test_backoff_doubles_with_jitter_up_to_its_cap_and_retry_after_wins_up_to_its_own() -> None:
    backoff = Backoff(base_s=1.0, cap_s=4.0, retry_after_cap_s=30.0)
    for attempt, step in [(1, 1.0), (2, 2.0), (3, 4.0), (6, 4.0)]:
        delays = [backoff.delay(attempt, None) for _ in range(50)]
        assert all(step / 2 <= d <= step for d in delays)  # never below half the step
        assert len(set(delays)) > 1  # concurrent retries spread out
    assert backoff.delay(1, 12.0) == 12.0
    assert backoff.delay(1, 90.0) == 30.0


def test_sync_attempts_retry_the_transient_failure_then_raise_the_clients_error() -> None:
    waits: list[float] = []
    tries = 0
    with pytest.raises(Spent, match="failed after 3 attempts: 503 busy") as err:
        for attempt in _policy(3, waits).attempts_in_thread():
            with attempt:
                tries += 1
                raise Retryable("503 busy", delay=0.004)
    assert tries == 3
    assert waits == [0.004, 0.004]  # Retry-After, under its cap, before each retry
    assert isinstance(err.value.__cause__, Retryable)


def test_async_attempts_raise_other_errors_at_once_and_return_a_success() -> None:
    async def go() -> tuple[int, str]:
        tries = 0
        value = ""
        async for attempt in _policy(4, []).async_attempts():
            with attempt:
                tries += 1
                if tries < 2:
                    raise Retryable("timed out")
                value = "ok"
        return tries, value

    assert asyncio.run(go()) == (2, "ok")

    async def refused() -> None:
        async for attempt in _policy(4, []).async_attempts():
            with attempt:
                raise ValueError("400 bad request")

    with pytest.raises(ValueError, match="400 bad request"):
        asyncio.run(refused())


def test_each_retry_is_logged_with_its_reason_number_and_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = retry_log(logging.getLogger("deepsearcher.test"), "embedding request")
    with caplog.at_level(logging.WARNING):
        log("429 rate limited", 1, 0.25)
    assert "embedding request failed (429 rate limited); retry 1 in 0.25s" in caplog.text
