"""Exceptions raised by ray_harness: every one of them is a :class:`RayHarnessError`.

RayHarnessError
├── ModelThrottledException        the provider rate-limited us (retryable)
├── ContextWindowOverflowException the conversation no longer fits the model
├── MaxTokensReachedException      the model hit its output limit mid-answer
├── ConcurrencyException           a second concurrent invocation of one agent
├── IdempotencyAbortedError        the invocation a duplicate idempotency_token waited on ended without a result
├── CheckpointException            a checkpoint dict failed validation
├── StructuredOutputException      the model never produced the structured output
├── SessionException               a session store is unreadable or inconsistent
├── AggregateMemoryError           memory store operations failed (``errors``: each one)
├── StorageError                   a ray_harness.storage backend failed, or a key was invalid
├── EventLoopException             the agent loop failed (wraps the cause)
├── ModelConfigurationError        no model, or a model that cannot be built (also ValueError)
├── ProviderTokenCountError        a provider's native token count failed (count_tokens falls back)
└── RemoteActorError               the Ray actor behind a handle died

Other modules add their own, under the same base (and a built-in base where
one fits, so ``except TimeoutError`` keeps working): the sandbox errors
(:mod:`ray_harness.sandbox.errors`), the MCP client's
``MCPClientInitializationError`` (also ``RuntimeError``) and
``MCPCallCancelled``, ``ScriptError`` of the scripted test model (also
``AssertionError``), and ``InterruptException``, the control-flow signal of
human-in-the-loop pauses, which the loop turns into ``stop_reason="interrupt"``.

Every class pickles with its attributes intact, because errors cross Ray
actor boundaries (``BaseException.__reduce__`` replays only ``args``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray_harness.types.content import Message

__all__ = (
    "ActorStoppedError",
    "AggregateMemoryError",
    "CheckpointException",
    "ConcurrencyException",
    "ContextWindowOverflowException",
    "EventLoopException",
    "IdempotencyAbortedError",
    "MCPClientInitializationError",
    "MaxTokensReachedException",
    "ModelConfigurationError",
    "ModelThrottledException",
    "ProviderTokenCountError",
    "RayHarnessError",
    "RemoteActorError",
    "SessionException",
    "SnapshotException",
    "StorageError",
    "StructuredOutputException",
    "ToolProviderException",
)


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class RayHarnessError(Exception):
    """Base class of every error ray_harness raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


class ModelThrottledException(RayHarnessError):
    """The model provider throttled the request; the retry strategy retries it."""

    def __init__(self, message: str = "model throttled", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class ContextWindowOverflowException(RayHarnessError):
    """The request exceeded the model's context window."""


class MaxTokensReachedException(RayHarnessError):
    """The model stopped at its output-token limit mid-answer.

    As in Strands, the invocation is not rolled back: the partial answer stays in the agent's history
    (tool uses it could not finish replaced by a text note) and is also ``partial_message``, so calling
    the agent again continues the conversation.
    """

    def __init__(self, message: str = "the model stopped at its max_tokens limit", *,
                 partial_message: Message | None = None) -> None:
        super().__init__(message)
        self.partial_message = partial_message


class ConcurrencyException(RayHarnessError):
    """An agent was invoked while another invocation of it was running."""


class IdempotencyAbortedError(RayHarnessError):
    """A call that waited on the running invocation of its ``idempotency_token`` got no result from it.

    That invocation was stopped before it had one: its task was cancelled, or its stream was closed early.
    """


class CheckpointException(RayHarnessError):
    """A checkpoint could not be created, validated or resumed."""


class StructuredOutputException(RayHarnessError):
    """The model did not produce valid structured output."""


class SessionException(RayHarnessError):
    """A session could not be read or written consistently."""


class StorageError(RayHarnessError):
    """A :mod:`ray_harness.storage` operation failed (Strands' name): an invalid key, or the backend's error.

    Backends wrap their own failures (file system, S3) in it, the cause chained, so a caller handles every
    backend the same way.
    """


class AggregateMemoryError(RayHarnessError):
    """One or more memory store operations failed (Strands' name); ``errors`` holds each store's exception."""

    def __init__(self, message: str, errors: list[BaseException]) -> None:
        super().__init__(message)
        self.errors = list(errors)


class SnapshotException(RayHarnessError):
    """A Strands-style ``Snapshot`` could not be taken or loaded (a bad field name, version or scope)."""


class EventLoopException(RayHarnessError):
    """The agent loop failed; ``original_exception`` holds the cause."""

    def __init__(self, original_exception: BaseException, request_state: dict[str, Any] | None = None) -> None:
        super().__init__(str(original_exception))
        self.original_exception = original_exception
        self.request_state = request_state or {}


class ToolProviderException(RayHarnessError):
    """A tool provider could not load its tools (Strands' name): ``MCPClientInitializationError`` is one."""


class MCPClientInitializationError(ToolProviderException, RuntimeError):
    """The MCP server could not be started or reached; the message names the command or URL.

    A ``ToolProviderException``: an agent whose MCP server fails to start raises it from its first run, and
    Strands code catches it there as ``ToolProviderException``.
    """


class ModelConfigurationError(RayHarnessError, ValueError):
    """No model was configured, or a model string could not be resolved."""


class ProviderTokenCountError(RayHarnessError):
    """A provider's native token count failed; a model's ``count_tokens`` raises and catches it to fall back.

    Strands' name, kept for custom models written against it: the estimate then stands in for the count.
    """


class RemoteActorError(RayHarnessError):
    """The Ray actor behind a remote handle died or became unreachable."""

    def __init__(self, message: str, *, actor_name: str | None = None) -> None:
        super().__init__(message)
        self.actor_name = actor_name


class ActorStoppedError(RemoteActorError):
    """The actor behind a remote handle was stopped on purpose, not by a crash.

    Stopped by ``RemoteAgent.shutdown()`` / ``RemoteAgent.kill()``, ``AgentPool.shutdown()`` or ``ray.kill``, from
    this process or another one. Raised for the calls that were running or queued in it then, and for calls sent to it afterwards. Such a
    call is never sent again (a crashed actor's may be, after its restart).
    """
