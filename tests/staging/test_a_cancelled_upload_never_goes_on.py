"""Ctrl-C while PUTs are in flight ends the upload: `s3_http.within` lets a cancellation through even when the
answer it waits for arrives in the same instant. asyncio.wait_for in Python 3.10 and 3.11 returns that answer
instead (CPython gh-86296), so a worker went on to its next file after Ctrl-C and waited out a held PUT's
timeouts (a stage still running 120 s after SIGINT in a fresh-clone CI run)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from cloudddp.staging.s3_http import within


def cancelled_as_the_answer_arrives(wait: Callable[[float, Awaitable[Any]], Awaitable[Any]]) -> str:
    async def scenario() -> str:
        answer = asyncio.get_running_loop().create_future()

        async def response() -> int:
            return await answer

        async def worker() -> str:
            await wait(60, response())
            return "went on to the next file"

        task = asyncio.ensure_future(worker())
        for _ in range(3):  # the worker is waiting for the answer
            await asyncio.sleep(0)
        answer.set_result(200)
        task.cancel()  # Ctrl-C, in the same instant
        try:
            return await task
        except asyncio.CancelledError:
            return "stopped"

    return asyncio.run(scenario())


def test_a_cancellation_as_the_answer_arrives_stops_the_worker() -> None:
    assert cancelled_as_the_answer_arrives(within) == "stopped"


def test_the_answer_and_the_timeout_are_as_before() -> None:
    async def answered() -> int:
        return 7

    async def never() -> None:
        await asyncio.Event().wait()

    assert asyncio.run(within(1, answered())) == 7
    with pytest.raises(TimeoutError):
        asyncio.run(within(0.05, never()))
