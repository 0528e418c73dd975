"""The real model server that ``scripts/ci/model_server.sh`` starts, as the tests see it.

The script exports ``RAY_HARNESS_REAL_MODEL_URL`` (``http://127.0.0.1:<port>/v1``) and
``RAY_HARNESS_REAL_MODEL_ID``: SmolLM2-135M-Instruct under ``transformers serve`` on the CPU. It decodes
greedily and makes a few tokens per second on a loaded machine, so every request is capped (``max_tokens``)
and ends at the first full stop: short, repeatable answers, and no ``MaxTokensReachedException`` for the
questions the tests ask. ``transformers serve`` runs one generation at a time (no continuous batching):
the cancel test relies on that.
"""

from __future__ import annotations

import json
import os
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from ray_harness import Agent
from ray_harness.models import Model, OpenAIModel, from_string
from tests.conftest import missing_service

URL_VARIABLE = "RAY_HARNESS_REAL_MODEL_URL"
ID_VARIABLE = "RAY_HARNESS_REAL_MODEL_ID"
MAX_TOKENS = 24
STOP = "."
QUESTIONS = ("What is the capital of France?", "What is the capital of Italy?", "What is the capital of Japan?")
# The two ways a user reaches an OpenAI-compatible server: a spec string and the model object.
FORMS = ("spec", "object")


@dataclass(frozen=True)
class RealServer:
    base_url: str
    model_id: str

    def spec(self, **query: Any) -> str:
        """An ``openai-compatible:`` spec string for the server, capped through its query (``None`` drops a key)."""
        query = {key: value for key, value in {"max_tokens": MAX_TOKENS, "stop": STOP, **query}.items()
                 if value is not None}
        return f"openai-compatible:{self.base_url}#{self.model_id}?{urlencode(query)}"

    def model(self, **params: Any) -> OpenAIModel:
        """An ``OpenAIModel`` on the server, capped through its ``params`` (a ``None`` value drops a key)."""
        params = {"max_tokens": MAX_TOKENS, "stop": STOP, **params}
        params = {key: [value] if key == "stop" else value for key, value in params.items() if value is not None}
        return OpenAIModel(self.model_id, params=params,
                           client_args={"base_url": self.base_url, "api_key": "EMPTY"})

    def prompt_tokens(self, prompt: str) -> int:
        """The prompt tokens the server counts for ``prompt`` as a lone user message (one-token reply)."""
        body = {"model": self.model_id, "max_tokens": 1,
                "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}]}
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            return int(json.load(response)["usage"]["prompt_tokens"])

    def build(self, form: str, **params: Any) -> Model:
        """The model in one of :data:`FORMS` (the spec string resolved as ``Agent(model=...)`` would)."""
        return from_string(self.spec(**params)) if form == "spec" else self.model(**params)


def real_server() -> RealServer:
    """The server from the environment; a skip locally, a failure in CI, when it is not there."""
    base_url, model_id = os.environ.get(URL_VARIABLE), os.environ.get(ID_VARIABLE)
    if not base_url or not model_id:
        missing_service(f"no real model server: run scripts/ci/model_server.sh and export {URL_VARIABLE} and "
                        f"{ID_VARIABLE} from the environment file it writes")
    assert base_url is not None and model_id is not None
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=30) as response:
            served = [entry["id"] for entry in json.load(response)["data"]]
    except OSError as error:
        missing_service(f"the real model server at {base_url} does not answer: {error}")
    if model_id not in served:
        missing_service(f"the real model server at {base_url} serves {served}, not {model_id!r}")
    return RealServer(base_url, model_id)


def two_node_graph(server: RealServer) -> Any:
    """answer (spec string) → restate (``OpenAIModel``): the evaluation target of the Ray smoke test."""
    from ray_harness.multiagent import GraphBuilder

    builder = GraphBuilder()
    builder.add_node(Agent(server.spec(), name="answer", system_prompt="Answer in one short sentence."), "answer")
    builder.add_node(Agent(server.model(), name="restate", system_prompt="Restate the answer in one short sentence."),
                     "restate")
    builder.add_edge("answer", "restate")
    return builder.build(runtime="local")
