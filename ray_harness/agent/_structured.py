"""Structured output: a tool named after the pydantic model that the model must call."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from ray_harness.types.content import ToolResult, ToolUse
from ray_harness.types.tools import ToolSpec
from ray_harness.types.validation import describe_validation_error

__all__ = ("StructuredOutput",)

PROMPT = "You must format the previous response as structured output."


class StructuredOutput:
    def __init__(self, output_model: type) -> None:
        if not (isinstance(output_model, type) and issubclass(output_model, BaseModel)):
            raise TypeError(f"structured_output_model must be a pydantic BaseModel class, got {output_model!r}")
        self.model: type[BaseModel] = output_model
        self.name = output_model.__name__
        self.value: Any = None
        self.forced = False
        self.prompt = PROMPT
        schema = output_model.model_json_schema()
        description = schema.pop("description", None) or (output_model.__doc__ or "").strip()
        schema.pop("title", None)
        self.spec: ToolSpec = {
            "name": self.name,
            "description": description or f"Return the final answer as {self.name}.",
            "inputSchema": {"json": schema},
        }

    def tool_choice(self) -> dict[str, Any] | None:
        return {"tool": {"name": self.name}} if self.forced else None

    def handle(self, tool_use: ToolUse) -> ToolResult:
        try:
            self.value = self.model.model_validate(tool_use.get("input") or {})
        except ValidationError as error:
            return {"toolUseId": tool_use["toolUseId"], "status": "error",
                    "content": [{"text": f"Error: {describe_validation_error(error, self.name)}"}]}
        return {"toolUseId": tool_use["toolUseId"], "status": "success",
                "content": [{"text": "Structured output recorded."}]}
