"""Optional smoke tests against the real APIs.

Skipped unless ``RAY_HARNESS_LIVE_TESTS=1`` and the provider's key are set (never in CI: they cost money).
Keys are read at import, before the autouse fixture hides them from the other tests.
"""

from __future__ import annotations

import os

import pytest

from ray_harness import Agent, tool

LIVE = os.environ.get("RAY_HARNESS_LIVE_TESTS") == "1"
ANTHROPIC_KEY = os.environ.get("ANTHROPIC_API_KEY")
OPENAI_KEY = os.environ.get("OPENAI_API_KEY")
AWS = {name: os.environ[name] for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
       if name in os.environ}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _check(agent: Agent) -> None:
    result = agent("Use the add tool to compute 19 + 23, then answer with just the number.")
    assert "42" in str(result)
    assert result.metrics.accumulated_usage["inputTokens"] > 0


@pytest.mark.skipif(not (LIVE and ANTHROPIC_KEY), reason="set RAY_HARNESS_LIVE_TESTS=1 and ANTHROPIC_API_KEY")
def test_live_anthropic() -> None:
    from ray_harness.models import AnthropicModel

    model_id = os.environ.get("RAY_HARNESS_LIVE_ANTHROPIC_MODEL", "claude-haiku-4-5")
    _check(Agent(AnthropicModel(model_id, max_tokens=256, client_args={"api_key": ANTHROPIC_KEY}), tools=[add]))


@pytest.mark.skipif(not (LIVE and OPENAI_KEY), reason="set RAY_HARNESS_LIVE_TESTS=1 and OPENAI_API_KEY")
def test_live_openai() -> None:
    from ray_harness.models import OpenAIModel

    model_id = os.environ.get("RAY_HARNESS_LIVE_OPENAI_MODEL", "gpt-4o-mini")
    _check(Agent(OpenAIModel(model_id, client_args={"api_key": OPENAI_KEY}), tools=[add]))


@pytest.mark.skipif(not (LIVE and "AWS_ACCESS_KEY_ID" in AWS), reason="set RAY_HARNESS_LIVE_TESTS=1 and AWS keys")
def test_live_bedrock() -> None:
    import boto3

    from ray_harness.models import BedrockModel

    model_id = os.environ.get("RAY_HARNESS_LIVE_BEDROCK_MODEL", "us.amazon.nova-lite-v1:0")
    session = boto3.Session(aws_access_key_id=AWS["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=AWS.get("AWS_SECRET_ACCESS_KEY"),
                            aws_session_token=AWS.get("AWS_SESSION_TOKEN"))
    _check(Agent(BedrockModel(model_id, boto_session=session), tools=[add]))
