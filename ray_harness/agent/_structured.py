"""Structured output: a tool named after the pydantic model that the model must call."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from ray_harness.types.content import Message, ToolResult, ToolUse
from ray_harness.types.exceptions import StructuredOutputException
from ray_harness.types.tools import ToolSpec
from ray_harness.types.validation import describe_validation_error

__all__ = ("StructuredOutput",)

PROMPT = "You must format the previous response as structured output."


class StructuredOutput:
    def __init__(self, output_model: type, prompt: str | None = None) -> None:
        if not (isinstance(output_model, type) and issubclass(output_model, BaseModel)):
            raise TypeError(f"structured_output_model must be a pydantic BaseModel class, got {output_model!r}")
        self.model: type[BaseModel] = output_model
        self.name = output_model.__name__
        self.value: Any = None
        self.forced = False
        self.prompt = prompt or PROMPT
        schema = output_model.model_json_schema()
        description = schema.pop("description", None) or (output_model.__doc__ or "").strip()
        schema.pop("title", None)
        # Strands' wording: the loop ends once this tool succeeds, so the model must call it last.
        self.spec: ToolSpec = {
            "name": self.name,
            "description": "IMPORTANT: This StructuredOutputTool should only be invoked as the last and final tool "
                           "before returning the completed result to the caller. "
                           f"<description>{description or f'{self.name} structured output tool'}</description>",
            "inputSchema": {"json": schema},
        }

    def tool_choice(self) -> dict[str, Any] | None:
        return {"tool": {"name": self.name}} if self.forced else None

    def handle(self, tool_use: ToolUse) -> ToolResult:
        """Validate the model's call; the result texts are Strands' (the error one lists what to fix)."""
        try:
            self.value = self.model.model_validate(tool_use.get("input") or {})
        except ValidationError as error:
            return {"toolUseId": tool_use["toolUseId"], "status": "error",
                    "content": [{"text": _validation_feedback(self.name, error)}]}
        return {"toolUseId": tool_use["toolUseId"], "status": "success",
                "content": [{"text": f"Successfully validated {self.name} structured output"}]}

    def from_text(self, message: Message) -> BaseModel:
        """The answer of the forced turn read as one JSON object, as in Strands.

        A provider that cannot force a tool may answer the forced request with the JSON as text.

        Raises:
            StructuredOutputException: The text is no JSON object, or does not validate.
        """
        text = "".join(block.get("text", "") for block in message.get("content", []))
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if not isinstance(data, dict):
            raise StructuredOutputException(
                f"the model did not produce the structured output {self.name!r} even when forced: it neither "
                "called the tool nor answered with a JSON object"
            )
        try:
            value = self.model.model_validate(data)
        except ValidationError as error:
            raise StructuredOutputException(
                f"the structured output the model answered as text failed validation: "
                f"{describe_validation_error(error, self.name)}"
            ) from error
        self.value = value
        return value


def _validation_feedback(name: str, error: ValidationError) -> str:
    """Strands' text for a failed structured output call: one ``- Field '<path>': <problem>`` line each."""
    lines = [f"- Field '{' -> '.join(str(part) for part in problem['loc']) or 'root'}': {problem['msg']}"
             for problem in error.errors()]
    return f"Validation failed for {name}. Please fix the following errors:\n" + "\n".join(lines)
