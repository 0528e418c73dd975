"""Strands' ``OpenAIModel(bedrock_mantle_config=...)``: Amazon Bedrock's OpenAI-compatible endpoints.

Bedrock serves the Chat Completions API at ``bedrock-mantle`` (the default endpoint family) and at
``bedrock-runtime``'s ``/openai/v1``, authenticated by a short-term Bedrock API key: a bearer token that
``aws-bedrock-token-generator`` mints from AWS credentials. A fresh token goes with every request (as in Strands),
so an agent outlives the token's lifetime; the region is resolved per request too, from the config, its
``boto_session`` or the AWS chain.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from ray_harness.types.exceptions import ModelConfigurationError

__all__ = ("BedrockMantle",)

_KEYS = ("endpoint", "region", "boto_session", "credentials_provider", "expiry")
_ENDPOINTS = ("bedrock-mantle", "bedrock-runtime")
_REGION = re.compile(r"\A[a-z]{2}(-[a-z]+)+-[0-9]+\Z")  # anchored: a region becomes part of the endpoint's host
# bedrock-mantle serves these model lines from /openai/v1 and every other one from /v1 (Strands routes the same);
# bedrock-runtime serves all of them from /openai/v1.
_OPENAI_PATH_LINES = ("openai.gpt-5.", "openai.gpt-6-", "openai.gpt-6.", "xai.grok-4.", "google.gemma-4-")
_PACKAGE_HELP = "bedrock_mantle_config needs the aws-bedrock-token-generator package: pip install aws-bedrock-token-generator"


class BedrockMantle:
    """A checked ``bedrock_mantle_config``: where requests go and the token they carry.

    Raises:
        ValueError: An unknown key, or a bad ``endpoint`` / ``region`` / ``expiry``, named.
        ImportError: ``aws-bedrock-token-generator`` is not installed.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        if not isinstance(config, Mapping):
            raise ValueError(f"bedrock_mantle_config must be a dict, got {type(config).__name__}")
        unknown = sorted(set(config) - set(_KEYS))
        if unknown:
            raise ValueError(f"bedrock_mantle_config: unknown key(s) {unknown}; it takes {', '.join(_KEYS)}")
        endpoint = config.get("endpoint", _ENDPOINTS[0])
        if endpoint not in _ENDPOINTS:
            raise ValueError(f"bedrock_mantle_config.endpoint must be 'bedrock-mantle' or 'bedrock-runtime', "
                             f"got {endpoint!r}")
        if "region" in config:
            _checked_region(config["region"], "bedrock_mantle_config.region")
        if "expiry" in config and not isinstance(config["expiry"], timedelta):
            raise ValueError(f"bedrock_mantle_config.expiry must be a datetime.timedelta, got {config['expiry']!r}")
        _token_generator()  # a missing package is named where the model is built, not at its first request
        self.config = dict(config)
        self.endpoint: str = endpoint

    def options(self, model_id: str) -> dict[str, Any]:
        """``base_url`` and ``api_key`` (a freshly minted token) for a request to ``model_id``; this blocks."""
        region = self._region()
        if self.endpoint == "bedrock-runtime":
            base_url = f"https://bedrock-runtime.{region}.amazonaws.com/openai/v1"
        else:
            path = "/openai/v1" if model_id.startswith(_OPENAI_PATH_LINES) else "/v1"
            base_url = f"https://bedrock-mantle.{region}.api.aws{path}"
        arguments: dict[str, Any] = {"region": region}
        if "credentials_provider" in self.config:
            arguments["aws_credentials_provider"] = self.config["credentials_provider"]
        if "expiry" in self.config:
            arguments["expiry"] = self.config["expiry"]
        try:
            token = _token_generator()(**arguments)
        except Exception as error:
            raise ModelConfigurationError(f"could not mint an Amazon Bedrock token for region {region!r} "
                                          f"({type(error).__name__}: {error}): check the AWS credentials") from error
        return {"base_url": base_url, "api_key": token}

    def _region(self) -> str:
        if self.config.get("region"):
            return str(self.config["region"])
        session = self.config.get("boto_session")
        if session is None:
            import boto3

            session = boto3.Session()  # AWS_REGION / AWS_DEFAULT_REGION, the profile, instance metadata
        if session.region_name:
            return _checked_region(session.region_name, "the boto session's region")
        raise ModelConfigurationError("no AWS region for bedrock_mantle_config: give it 'region', a boto_session "
                                      "with a region, or set AWS_REGION")

    def __getstate__(self) -> dict[str, Any]:
        if "credentials_provider" in self.config:
            raise TypeError("an OpenAIModel whose bedrock_mantle_config has a credentials_provider cannot be pickled "
                            "(e.g. sent to a Ray actor): give the actor's credentials through the AWS chain or a "
                            "boto_session instead")
        from ray_harness.models.bedrock import _session_spec

        state = dict(self.__dict__)
        state["config"] = {**self.config, "boto_session": _session_spec(self.config.get("boto_session"))}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        from ray_harness.models.bedrock import _session_from_spec

        spec = state["config"].pop("boto_session", None)
        self.__dict__.update(state)
        if spec is not None:
            self.config["boto_session"] = _session_from_spec(spec)


def _checked_region(region: Any, name: str) -> str:
    if not isinstance(region, str) or not _REGION.fullmatch(region):
        raise ValueError(f"{name} is not an AWS region: {region!r}")
    return region


def _token_generator() -> Any:
    try:
        from aws_bedrock_token_generator import provide_token
    except ImportError as error:
        raise ImportError(_PACKAGE_HELP) from error
    return provide_token
