"""One A2A ``contextId`` is one conversation: a follow-up task in it continues the history, on any replica.

Where API.md is silent this follows Strands' A2A server (``StrandsA2AExecutor``: an agent per context).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import TaskState

from tests.serve.a2a_client import answer, ask, in_context, official_client, result_text, send, user
from tests.serve.targets import build_chat_agent

pytestmark = pytest.mark.timeout(240)


async def test_follow_ups_in_a_context_continue_its_conversation_on_any_replica(replicas: Any) -> None:
    first, second = replicas(build_chat_agent), replicas(build_chat_agent)
    async with official_client(first.url, streaming=False) as one, official_client(second.url) as two:
        opened = await ask(one, user("hello"))
        assert result_text(opened) == "turn 1: hello"
        context = opened.context_id
        streamed = await send(two, in_context("and again", context))  # the other replica, streaming
        assert streamed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        third = await ask(one, in_context("third", context))
        assert result_text(third) == "turn 3: third"
        other = await ask(one, user("elsewhere"))  # a new context starts afresh
        assert result_text(other) == "turn 1: elsewhere"


async def test_concurrent_turns_in_one_context_are_all_kept(replicas: Any) -> None:
    first, second = replicas(build_chat_agent), replicas(build_chat_agent)
    async with official_client(first.url, streaming=False) as one, \
            official_client(second.url, streaming=False) as two:
        context = (await ask(one, user("start"))).context_id
        await asyncio.gather(*[send(client, in_context(f"side {index}", context))
                               for index, client in enumerate([one, two, one, two])])
        last = await ask(two, in_context("last", context))
        assert result_text(last) == "turn 6: last"


async def test_an_answered_interrupt_joins_its_contexts_conversation(replicas: Any, refund_log: Path) -> None:
    first, second = replicas(build_chat_agent), replicas(build_chat_agent)
    async with official_client(first.url, streaming=False) as one, \
            official_client(second.url, streaming=False) as two:
        context = (await ask(one, user("hello"))).context_id
        paused = await ask(two, in_context("refund order C7", context))
        assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        done = await ask(one, user(task_id=paused.id, data=answer(paused)))
        assert result_text(done) == "turn 2: Done: refunded C7."
        follow = await ask(two, in_context("bye", context))
        assert result_text(follow) == "turn 3: bye"
    assert await asyncio.to_thread(refund_log.read_text) == "C7\n"


async def test_data_parts_reach_the_agent_and_file_parts_are_refused_by_name(replicas: Any) -> None:
    from a2a.types.a2a_pb2 import Part
    from a2a.utils.errors import InvalidParamsError

    replica = replicas(build_chat_agent)
    async with official_client(replica.url, streaming=False) as client:
        task = await ask(client, user("look at", data={"order": "A1", "items": [1, 2]}))
        # The card accepts application/json: a data part reaches the agent as JSON text, as in Strands.
        said, _, data = result_text(task).partition("\n[Structured Data]\n")
        assert (said, json.loads(data)) == ("turn 1: look at", {"order": "A1", "items": [1, 2]})
        with_file = user("read this")
        with_file.message.parts.append(Part(raw=b"%PDF-1.4", media_type="application/pdf", filename="a.pdf"))
        with pytest.raises(InvalidParamsError, match=r"message\.parts\[1\].*application/pdf"):
            await send(client, with_file)
