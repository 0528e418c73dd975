"""``ModelExtractor``: a model call distills conversation messages into discrete facts."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from ray_harness.memory.extraction.types import ExtractionResult, ExtractorContext
from ray_harness.types.content import Message

if TYPE_CHECKING:
    from ray_harness.models.base import Model

__all__ = ("DEFAULT_SYSTEM_PROMPT", "ModelExtractor")

logger = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = (
    "You extract durable facts worth remembering across future conversations from a transcript.\n"
    "\n"
    "Each entry is one discrete, self-contained fact (a preference, decision, or stable detail about "
    "the user or task). Do not include transient chit-chat, questions, or anything already obvious."
)
"""What counts as a fact unless ``system_prompt`` says otherwise (Strands' wording)."""

_OUTPUT_FORMAT = (
    'Return ONLY a JSON array of objects, each: {"content": string}. If there is nothing worth remembering, return [].'
)  # appended to every system prompt: the parser needs this shape whatever the prompt says


class ModelExtractor:
    """An :class:`~ray_harness.memory.Extractor` that asks a model for the facts worth keeping.

    Args:
        model: The model to ask; default: :attr:`ExtractorContext.default_model` (``agent.aux_model``).
        system_prompt: What counts as a fact (default :data:`DEFAULT_SYSTEM_PROMPT`); the JSON output format is
            always appended.

    Example:
        ```python
        ExtractionConfig(trigger=[InvocationTrigger()], extractor=ModelExtractor(system_prompt="User preferences."))
        ```
    """

    def __init__(self, model: Model | None = None, system_prompt: str | None = None) -> None:
        self._model = model
        self._system_prompt = f"{system_prompt or DEFAULT_SYSTEM_PROMPT}\n\n{_OUTPUT_FORMAT}"

    @property
    def system_prompt(self) -> str:
        """The system prompt sent, output format included."""
        return self._system_prompt

    async def extract(self, messages: list[Message], context: ExtractorContext | None = None) -> list[ExtractionResult]:
        """The facts in ``messages``: one model call with the transcript as a single user message.

        Output that is not a JSON array of ``{"content": ...}`` objects (prose around it is tolerated) gives no
        entries, logged, rather than an error.

        Raises:
            ValueError: No model given and no default model.
        """
        model = self._model or (context.default_model if context is not None else None)
        if model is None:
            raise ValueError("ModelExtractor: no model configured and no default model available")
        if not messages:
            return []
        from ray_harness.agent.streaming import StreamState, read_stream  # the agent package: loaded on first use

        transcript = "\n".join(_render(message) for message in messages)
        prompt: Message = {"role": "user",
                           "content": [{"text": f"Extract facts from the following transcript:\n\n{transcript}"}]}
        stop = await read_stream(model.stream([prompt], None, self._system_prompt), StreamState())
        answer = "".join(block.get("text", "") for block in stop.message["content"]).strip()
        return parse_entries(answer, type(model).__name__)


def _render(message: Message) -> str:
    text = "\n".join(block["text"] for block in message["content"] if block.get("text"))
    return f"{message['role']}: {text}"


def parse_entries(text: str, model_name: str = "model") -> list[ExtractionResult]:
    """The entries of a model's answer: the JSON array from its first ``[`` to its last ``]``; ``[]`` if none."""
    start, end = text.find("["), text.rfind("]")
    if start == -1 or end < start:
        logger.warning("model=<%s> | ModelExtractor: no JSON array in model output, skipping", model_name)
        return []
    try:
        parsed: Any = json.loads(text[start:end + 1])
    except ValueError as error:
        logger.warning("model=<%s>, error=<%s> | ModelExtractor: failed to parse output", model_name, error)
        return []
    if not isinstance(parsed, list):
        return []
    entries: list[ExtractionResult] = []
    for item in parsed:
        if isinstance(item, dict) and isinstance(item.get("content"), str) and item["content"].strip():
            metadata = item.get("metadata")
            entries.append(ExtractionResult(content=item["content"].strip(),
                                            metadata=metadata if isinstance(metadata, dict) else None))
    return entries
