"""The one retry policy of the HTTP clients (the chat model and the remote embedder).

A call is tried up to ``attempts`` times while it fails with one of the ``retry_on`` errors
(other errors are raised at once); between attempts it waits the server's Retry-After (up to
a cap) or an exponential backoff with jitter. Once the attempts are spent, ``exhausted``
turns the last failure into the client's own typed error. The async form is used with
``async for attempt in ...: with attempt:`` so that whatever the block holds (a concurrency
slot) is released while the retry waits; the sync form sleeps in the calling thread.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception_type
from tenacity import stop_after_attempt as _stop_after_attempt


class Retryable(Exception):
    """A transient failure: worth another attempt after ``delay`` seconds (None: backoff)."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


@dataclass(frozen=True)
class Backoff:
    """``base_s`` is the first retry's delay scale (tests make it tiny); delays double per
    retry up to ``cap_s``. A server's Retry-After wins, up to ``retry_after_cap_s``."""

    base_s: float = 0.5
    cap_s: float = 8.0
    retry_after_cap_s: float = 30.0

    def delay(self, attempt: int, hinted: float | None) -> float:
        if hinted is not None:
            return min(hinted, self.retry_after_cap_s)
        # "Equal jitter": at least half the exponential step, so retries of concurrent calls
        # spread out without collapsing to zero.
        step = min(self.cap_s, self.base_s * 2 ** (attempt - 1))
        return step / 2 + random.uniform(0, step / 2)


@dataclass(frozen=True)
class RetryPolicy:
    """How one client retries. ``reason`` gives a failure's one-line reason and the delay the
    server asked for (None when it asked none); ``exhausted(attempts, reason)`` is the error
    raised (from the last failure) once the attempts are spent."""

    attempts: int
    backoff: Backoff
    retry_on: tuple[type[BaseException], ...]
    reason: Callable[[BaseException], tuple[str, float | None]]
    exhausted: Callable[[int, str], Exception]
    log: Callable[[str, int, float], None]  # (reason, retry number, delay) before each wait

    def _kwargs(self) -> dict[str, Any]:
        def wait(state: RetryCallState) -> float:
            _, hinted = self.reason(_failure(state))
            return self.backoff.delay(state.attempt_number, hinted)

        def before_sleep(state: RetryCallState) -> None:
            reason, _ = self.reason(_failure(state))
            self.log(reason, state.attempt_number, state.upcoming_sleep)

        def give_up(state: RetryCallState) -> NoReturn:
            exc = _failure(state)
            reason, _ = self.reason(exc)
            raise self.exhausted(state.attempt_number, reason) from exc

        return {
            "retry": retry_if_exception_type(self.retry_on),
            "stop": _stop_after_attempt(self.attempts),
            "wait": wait,
            "before_sleep": before_sleep,
            "retry_error_callback": give_up,
        }

    def async_attempts(self) -> AsyncRetrying:
        return AsyncRetrying(**self._kwargs())

    def attempts_in_thread(self) -> Retrying:
        return Retrying(**self._kwargs())


def retryable_reason(exc: BaseException) -> tuple[str, float | None]:
    """The reason and asked-for delay of a ``Retryable``; a short description otherwise."""
    if isinstance(exc, Retryable):
        return exc.reason, exc.delay
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}", None


def retry_log(logger: logging.Logger, what: str) -> Callable[[str, int, float], None]:
    """The warning before each wait: ``<what> failed (<reason>); retry <n> in <s>s``."""

    def log(reason: str, attempt: int, delay: float) -> None:
        logger.warning("%s failed (%s); retry %d in %.2fs", what, reason, attempt, delay)

    return log


def _failure(state: RetryCallState) -> BaseException:
    exc = state.outcome.exception() if state.outcome is not None else None
    if exc is None:  # tenacity asks for waits and stops only after a failed attempt
        raise AssertionError("retry policy consulted after a successful attempt")
    return exc
