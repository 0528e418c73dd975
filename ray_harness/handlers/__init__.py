"""Callback handlers for ``Agent(callback_handler=...)`` (see :mod:`ray_harness.handlers.callback_handler`)."""

from ray_harness.handlers.callback_handler import (
    CompositeCallbackHandler,
    PrintingCallbackHandler,
    null_callback_handler,
)

__all__ = ("CompositeCallbackHandler", "PrintingCallbackHandler", "null_callback_handler")
