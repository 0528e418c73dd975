"""``@tool``: turn a Python function into a tool whose spec comes from hints and docstring."""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import json
import math
import re
import sys
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Annotated, Any, TypeVar, get_args, get_origin, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import to_json
from typing_extensions import override

from ray_harness.middleware.types import ToolResultEvent
from ray_harness.tools._spec import checked_name
from ray_harness.tools._threads import run_in_tool_thread
from ray_harness.tools.base import HeldSpecTool, RawReturn, ToolContext, ToolStreamEvent, error_result, observe_raw
from ray_harness.types.content import ToolResult, ToolResultContent, ToolUse
from ray_harness.types.tools import ToolSpec
from ray_harness.types.validation import describe_validation_error

__all__ = ("DecoratedFunctionTool", "plain_json", "tool", "to_tool_result")

F = TypeVar("F", bound=Callable[..., Any])


class DecoratedFunctionTool(HeldSpecTool):
    """A function tool. Still callable as the original function.

    Its ``tool_spec`` may be replaced (the same name; inputs are still validated against the signature).
    """

    exposes_raw_call = True
    _hot_reload = True  # as in Strands: a new version of the function may replace the tool (register_tool)

    def __init__(self, func: Callable[..., Any], *, name: str | None, description: str | None,
                 context: bool | str, inputSchema: dict[str, Any] | None = None) -> None:  # noqa: N803
        self._setup(func, name, description, context, inputSchema, None)

    def _setup(self, func: Callable[..., Any], name: str | None, description: str | None, context: bool | str,
               inputSchema: dict[str, Any] | None, hints: dict[str, Any] | None) -> None:  # noqa: N803
        self._func = func
        self._options = (name, description, context, inputSchema)
        self._name = checked_name(name or func.__name__)
        self._context_param = _context_param(context)
        summary, arg_docs = _parse_docstring(inspect.getdoc(func) or "")
        # Kept: a copy of a function shipped by value holds only the globals its code uses, so its annotations may
        # not resolve where it was rebuilt (a plugin's @tool method crossing two processes) — its tool ships these.
        self._hints = hints if hints is not None else _type_hints(func)
        self._input_model = _input_model(func, self._name, arg_docs, self._context_param, self._hints)
        self._input_fields = tuple(self._input_model.model_fields)  # read per call: the class property costs more
        # As in Strands, a parameter named ``agent`` is not an input: the calling agent is passed in it.
        self._takes_agent = "agent" in inspect.signature(func).parameters and self._context_param != "agent"
        schema = _given_schema(inputSchema) or _clean_schema(self._input_model.model_json_schema())
        self._spec: ToolSpec = {
            "name": self._name,
            "description": description or summary or self._name,
            "inputSchema": {"json": schema},
        }
        functools.update_wrapper(self, func)

    @property
    def original_function(self) -> Callable[..., Any]:
        """The decorated function itself."""
        return self._func

    @property
    @override
    def tool_type(self) -> str:
        """Always ``"function"``, as in Strands."""
        return "function"

    @override
    def get_display_properties(self) -> dict[str, str]:
        """``Name``, ``Type`` and the decorated ``Function``'s name."""
        return {**super().get_display_properties(), "Function": getattr(self._func, "__name__", self._name)}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly, as if it were not decorated."""
        return self._func(*args, **kwargs)

    def __get__(self, instance: Any, owner: Any) -> Any:
        if instance is None:
            return self
        bound = DecoratedFunctionTool.__new__(DecoratedFunctionTool)
        bound.__dict__.update(self.__dict__)
        bound._func = self._func.__get__(instance, owner)
        return bound

    def __repr__(self) -> str:
        return f"<tool {self._name}>"

    def __reduce__(self) -> tuple[Any, ...]:
        # A module-level @tool shadows its function, so pickle by reference to the tool itself; anything
        # else is rebuilt from the function (cloudpickle ships such functions by value). A script's
        # ``__main__`` is another module in an actor process, so its tools ship by value too.
        module_name = getattr(self._func, "__module__", "") or ""
        module = sys.modules.get(module_name) if module_name != "__main__" and not _by_value(module_name) else None
        target: Any = module
        for part in getattr(self._func, "__qualname__", "").split("."):
            target = getattr(target, part, None)
        replaced = self._spec_replaced  # a replaced spec ships with the tool: by value
        if target is self and not replaced:
            return (_tool_by_reference, (self._func.__module__, self._func.__qualname__, self._is_dynamic))
        name, description, context, schema = self._options
        # The annotations resolved here, where the function's module is: a function shipped by value carries only
        # the globals its code uses, so string annotations (``from __future__ import annotations``) naming the
        # script's own types or ``ToolContext`` would not resolve on the other side.
        return (_rebuild_tool, (self._func, name, description, context, schema, self._spec if replaced else None,
                                self._hints, self._is_dynamic))

    def validate_input(self, tool_input: Any) -> dict[str, Any]:
        """Validate against the schema; raise ``ValueError`` naming the offending field."""
        if not isinstance(tool_input, dict):
            raise ValueError(f"input must be a JSON object, got {type(tool_input).__name__}")
        try:
            validated = self._input_model.model_validate(tool_input)
        except ValidationError as error:
            raise ValueError(describe_validation_error(error, "input")) from None
        return {name: getattr(validated, name) for name in self._input_fields}

    @override
    async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        use_id = tool_use["toolUseId"]
        kwargs = self._arguments(tool_use, context)
        if isinstance(kwargs, ToolResultEvent):
            yield kwargs
            return
        # Streaming functions, and any function a TOOL_RAW extension observes, run as a raw call whose last
        # event is the function's own return value; a plain function is simply awaited.
        if context._raw_observer is not None or inspect.isasyncgenfunction(self._func):
            # Closed in turn when this stream is closed (a cancel, a short-circuiting middleware): the user's
            # generator's `finally` runs before the tool is over, not later in the loop's cleanup.
            async with contextlib.aclosing(observe_raw(context, lambda: self._raw_call(tool_use, kwargs))) as events:
                async for event in events:
                    yield ToolResultEvent(to_tool_result(use_id, event.value)) if isinstance(event, RawReturn) \
                        else event
            return
        yield ToolResultEvent(to_tool_result(use_id, await self._call(kwargs)))

    def _result_call(self, tool_use: ToolUse, context: ToolContext) -> Coroutine[Any, Any, ToolResultEvent] | None:
        """:meth:`stream`'s one event as a coroutine, when it has only that one; None when it streams.

        For a caller that reads only the result (a quiet invocation): a plain function, with no TOOL_RAW
        observer, needs no generator around its call.
        """
        if context._raw_observer is not None or inspect.isasyncgenfunction(self._func):
            return None
        return self._result(tool_use, context)

    async def _result(self, tool_use: ToolUse, context: ToolContext) -> ToolResultEvent:
        kwargs = self._arguments(tool_use, context)
        if isinstance(kwargs, ToolResultEvent):
            return kwargs
        return ToolResultEvent(to_tool_result(tool_use["toolUseId"], await self._call(kwargs)))

    def _arguments(self, tool_use: ToolUse, context: ToolContext) -> dict[str, Any] | ToolResultEvent:
        """The function's keyword arguments, or the error result of an invalid input."""
        try:
            kwargs = self.validate_input(tool_use.get("input") or {})
        except ValueError as error:
            return ToolResultEvent(error_result(tool_use["toolUseId"],
                                                f"Error: invalid input for tool '{self._name}': {error}"))
        if self._context_param:
            kwargs[self._context_param] = context
        if self._takes_agent:
            kwargs["agent"] = context.agent
        return kwargs

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        if inspect.iscoroutinefunction(self._func):
            return await self._func(**kwargs)
        # NOTE: sync tools run in a thread so they never block the loop (or other concurrent tools).
        return await run_in_tool_thread(self._func, **kwargs)

    async def _raw_call(self, tool_use: ToolUse, kwargs: dict[str, Any]) -> AsyncGenerator[Any, None]:
        """The function itself: its stream events, then its return value as a ``RawReturn``."""
        if inspect.isasyncgenfunction(self._func):
            # As in Strands: every yield is streamed, and the last one is also the tool's result.
            last: Any = None
            async with contextlib.aclosing(self._func(**kwargs)) as items:
                async for item in items:
                    yield ToolStreamEvent(tool_use, item)
                    last = item
            yield RawReturn(last)
            return
        yield RawReturn(await self._call(kwargs))


def _by_value(module_name: str) -> bool:
    """Whether cloudpickle (the package's or Ray's copy) was told to ship ``module_name`` by value.

    Such a module is not importable where it goes (``register_pickle_by_value``), so its tools ship by value too.
    Asked of the picklers already imported only: a tool's pickling never imports one.
    """
    for pickler_name in ("cloudpickle", "ray.cloudpickle"):
        listed = getattr(sys.modules.get(pickler_name), "list_registry_pickle_by_value", None)
        if listed is not None and any(module_name == name or module_name.startswith(name + ".") for name in listed()):
            return True
    return False


def _tool_by_reference(module: str, qualname: str, dynamic: bool = False) -> Any:
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    if dynamic:  # marked where it was pickled: the module's tool here is the same tool, so it is marked too
        target.mark_dynamic()
    return target


def _rebuild_tool(func: Callable[..., Any], name: str | None, description: str | None, context: bool | str,
                  schema: dict[str, Any] | None, spec: ToolSpec | None = None,
                  hints: dict[str, Any] | None = None, dynamic: bool = False) -> DecoratedFunctionTool:
    rebuilt = DecoratedFunctionTool.__new__(DecoratedFunctionTool)
    rebuilt._setup(func, name, description, context, schema, hints)
    if dynamic:
        rebuilt.mark_dynamic()
    if spec is not None:
        rebuilt.tool_spec = spec
    return rebuilt


def to_tool_result(tool_use_id: str, value: Any) -> ToolResult:
    """Convert a tool's return value into a ``ToolResult``.

    A ``str`` is the text; a dict with ``status`` and ``content`` already is a result. Dicts, lists, tuples
    and pydantic models become a ``{"json": ...}`` block holding a fresh plain-JSON copy (datetimes as ISO
    strings, ``Decimal`` and ``Path`` as strings, sets as lists, ...), so neither a provider request nor a
    session write fails on the value later, and the caller's object is never shared with the history.
    A value JSON cannot hold (NaN, a circular reference, a key that is no string) becomes ``str(value)``
    text. Other values become text as in Strands: ``json.dumps`` for ``bool``, ``None``, ``int`` and
    finite ``float`` (``"true"``, ``"null"``, ``"1.5"``), ``str(value)`` for anything else.
    """
    if isinstance(value, str):
        text = value if type(value) is str else str.__str__(value)
        return {"toolUseId": tool_use_id, "status": "success", "content": [{"text": text}]}
    if isinstance(value, dict) and "status" in value and "content" in value:
        result = dict(value)
        result["toolUseId"] = tool_use_id
        return result  # type: ignore[return-value]
    if isinstance(value, dict | list | tuple | BaseModel):
        block: ToolResultContent
        try:
            block = {"json": plain_json(value)}
        except ValueError:
            block = {"text": str(value)}
        return {"toolUseId": tool_use_id, "status": "success", "content": [block]}
    if type(value) is int:
        text = int.__repr__(value)  # json.dumps' own text for a plain int, without the encoder's layers
    elif value is None or isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value)):
        text = json.dumps(value)
    else:
        text = str(value)
    return {"toolUseId": tool_use_id, "status": "success", "content": [{"text": text}]}


def plain_json(value: Any) -> Any:
    """A fresh copy of ``value`` made only of JSON types; ``ValueError`` if JSON cannot hold it."""
    # pydantic's serializer takes datetimes, Decimal, sets, enums, dataclasses and models; anything else
    # goes through str(). NaN and Infinity come out as bare constants, which the parse then rejects.
    return json.loads(to_json(value, fallback=str), parse_constant=_reject_constant)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@overload
def tool(func: F, /) -> DecoratedFunctionTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, context: bool | str = False,
    inputSchema: dict[str, Any] | None = None,  # noqa: N803
) -> Callable[[F], DecoratedFunctionTool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    context: bool | str = False,
    inputSchema: dict[str, Any] | None = None,  # noqa: N803 - the Converse field name
) -> DecoratedFunctionTool | Callable[[Callable[..., Any]], DecoratedFunctionTool]:
    """Declare a tool. ``context=True`` injects a ``ToolContext`` as parameter ``tool_context``.

    The input schema comes from the parameters' type hints; a parameter's description is a string in
    ``Annotated[type, "text"]``, else its docstring entry. A ``pydantic.Field(...)`` default keeps its
    constraints. As in Strands, parameters ``self``, ``cls`` and ``agent`` are not inputs: ``agent``
    receives the calling agent. ``inputSchema`` replaces the generated schema (a JSON schema, or the
    Converse form ``{"json": schema}``); inputs are still validated against the signature.
    """

    def decorate(target: Callable[..., Any]) -> DecoratedFunctionTool:
        return DecoratedFunctionTool(target, name=name, description=description, context=context,
                                     inputSchema=inputSchema)

    if func is not None:
        return decorate(func)
    return decorate


def _type_hints(func: Callable[..., Any]) -> dict[str, Any] | None:
    """``func``'s annotations resolved (``None`` when they do not resolve)."""
    try:
        return get_type_hints(func, include_extras=True)
    except Exception:
        return None


def _input_model(func: Callable[..., Any], name: str, docs: dict[str, str], context_param: str | None,
                 hints: dict[str, Any] | None = None) -> type[BaseModel]:
    if hints is None:
        hints = _type_hints(func)
    if hints is None:  # unresolvable annotations: fall back to raw ones
        hints = dict(getattr(func, "__annotations__", {}))
    fields: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        annotation = hints.get(param.name, Any)
        _check_context_param(param.name, annotation, context_param)
        if param.name in ("self", "cls", "agent") or param.name == context_param:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        fields[param.name] = (annotation, _field(param, annotation, docs))
    model_name = "".join(part.capitalize() for part in re.split(r"[_-]", name)) + "Input"
    return create_model(model_name, __config__=ConfigDict(arbitrary_types_allowed=True), **fields)


def _context_param(context: bool | str) -> str | None:
    """The parameter ``context=`` names: ``tool_context`` for True, a string stripped (never empty, as in Strands)."""
    if isinstance(context, bool):
        return "tool_context" if context else None
    if not isinstance(context, str) or not context.strip():
        raise ValueError(f"@tool(context=...) must be True or a parameter name, got {context!r}")
    return context.strip()


def _check_context_param(name: str, annotation: Any, context_param: str | None) -> None:
    """A parameter typed ``ToolContext`` must be the one ``context=`` names (as Strands checks)."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if annotation is not ToolContext or name == context_param:
        return
    if context_param is None:
        raise ValueError(f"parameter {name!r} is a ToolContext: declare the tool with @tool(context=True)"
                         f"{'' if name == 'tool_context' else f' or @tool(context={name!r})'}")
    raise ValueError(f"parameter {name!r} is a ToolContext but @tool(context=...) names {context_param!r}")


def _field(param: inspect.Parameter, annotation: Any, docs: dict[str, str]) -> Any:
    """The pydantic field of one parameter: its default and description.

    The description is, as in Strands, a string in ``Annotated[...]``, else the docstring's, else
    ``Parameter <name>``. A ``Field(...)`` default keeps its own default, constraints and description.
    """
    described = [meta for meta in get_args(annotation)[1:] if isinstance(meta, str)] \
        if get_origin(annotation) is Annotated else []
    description = described[-1] if described else docs.get(param.name) or f"Parameter {param.name}"
    if isinstance(param.default, FieldInfo):
        if param.default.description is not None:
            return param.default
        return FieldInfo.merge_field_infos(param.default, FieldInfo(description=description))
    default = ... if param.default is inspect.Parameter.empty else param.default
    return Field(default, description=description)


def _given_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """An ``inputSchema=`` JSON schema; the Converse form ``{"json": schema}`` is accepted too, as in Strands."""
    if schema is not None and set(schema) == {"json"} and isinstance(schema["json"], dict):
        return schema["json"]
    return schema


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    schema = dict(schema)
    schema.pop("title", None)
    required = schema.get("required", [])
    for name, prop in schema.get("properties", {}).items():
        if isinstance(prop, dict):
            prop.pop("title", None)
            if name not in required:
                _drop_null_branch(prop)
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    return schema


def _drop_null_branch(prop: dict[str, Any]) -> None:
    """``Optional[X] = default`` reads as ``X`` with its default, as Strands publishes it.

    The model omits the argument rather than sending ``null`` (which is still accepted); a required
    ``Optional[X]`` keeps its ``null`` branch, so the model can pass one.
    """
    branches = prop.get("anyOf")
    if not isinstance(branches, list) or len(branches) != 2 or {"type": "null"} not in branches:
        return
    (kept,) = [branch for branch in branches if branch != {"type": "null"}]
    del prop["anyOf"]
    prop.update(kept)


_KEPT_SECTIONS = ("returns:", "return:", "yields:", "yield:", "raises:", "raise:", "except:", "exceptions:",
                  "examples:", "example:", "note:", "notes:", "see also:", "seealso:", "references:", "ref:")
"""Google-style section headers that end ``Args:`` and stay in the description (Strands' list)."""

_REST_FIELD = re.compile(r"^:(\w+)((?:\s+[^:\s]+)*)\s*:\s*(.*)$")
"""A reST/Sphinx field line: ``:param [type] name: text``, ``:returns: text``, ``:raises Error: text``."""


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description and the arguments' texts of a docstring.

    Google style: the description is the docstring without its ``Args:`` section (``Returns:``,
    ``Raises:``, ``Example:`` ... stay, as Strands sends them: they tell the model what the tool gives
    back); ``name: text`` lines under ``Args:`` describe the arguments. reST/Sphinx fields
    (``:param name: text``) describe the arguments; all fields, ``:returns:`` included, are left out
    of the description.
    """
    lines = doc.splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section = "summary"
    current: str | None = None
    for raw in lines:
        line = raw.strip()
        field = _REST_FIELD.match(line) if line.startswith(":") else None
        if field is not None:
            kind, words, text = field.groups()
            name = words.split()[-1] if words.strip() else None  # ":param int limit:": the type comes first
            section, current = ("rest", name) if kind in {"param", "parameter", "arg", "argument"} and name \
                else ("other", None)
            if current:
                args[current] = text.strip()
            continue
        if section == "rest" and current and line:
            args[current] = (args[current] + " " + line).strip()  # a field's continuation line
            continue
        header = line.rstrip(":").lower()
        if line.endswith(":") and header in {"args", "arguments", "parameters", "params"}:
            section, current = "args", None
            continue
        if line.lower().startswith(_KEPT_SECTIONS) and not raw.startswith((" ", "\t")):
            section, current = "summary", None  # a section header, not an argument's "Note: ..." line
        if section == "summary":
            summary.append(raw.rstrip())
        elif section == "args" and line:
            match = re.match(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", line)
            if match and raw.startswith((" ", "\t")) and (current is None or not raw.startswith(" " * 8)):
                current = match.group(1).lstrip("*")
                args[current] = match.group(3).strip()
            elif current:
                args[current] = (args[current] + " " + line).strip()
    return "\n".join(summary).strip(), args
