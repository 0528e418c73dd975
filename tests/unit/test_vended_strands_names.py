"""The vended packages a Strands program imports exist under ``ray_harness`` with every public name Strands' have.

Listed literally (Strands 1.62's ``__all__``), so the test runs without Strands; with Strands installed it also
checks the lists are still Strands' own. What ray_harness leaves out on purpose is listed as such.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

VENDED = {
    "injection": ["InjectionConfig", "InjectionContext", "InjectionTrigger"],
    "vended_plugins.context_injector": ["ContextInjector", "InjectionContext", "InjectionTrigger"],
    "vended_plugins.context_offloader": ["ContextOffloader", "FileStorage", "InMemoryStorage", "S3Storage",
                                         "ShouldOffload", "Storage"],
    "vended_plugins.goal": ["GoalAttempt", "GoalLoop", "GoalResult", "GoalStopReason", "JUDGE_SYSTEM_PROMPT",
                            "JudgeConfig", "JudgeOutcome", "ValidationOutcome", "Validator", "build_judge_prompt"],
    "vended_plugins.skills": ["AgentSkills", "Skill", "SkillSource", "SkillSources"],
    "vended_tools": ["HANDOFF_INTERRUPT_NAME", "file_editor", "handoff_to_user", "http_request", "make_file_editor",
                     "make_handoff_to_user", "make_http_request", "make_mcp_router", "make_notebook",
                     "make_python_repl", "make_shell", "make_sleep", "make_stop", "make_subagent", "make_swarm",
                     "notebook", "python_repl", "shell", "sleep", "stop", "subagent", "swarm"],
    "vended_interventions": ["CedarAuthorization", "HumanInTheLoop"],
    "vended_interventions.hitl": ["HumanInTheLoop", "HumanInTheLoopClassifier", "LLMClassifierConfig"],
    "storage": ["InMemoryStorage", "LocalFileStorage", "S3Storage", "Storage"],
    "storage.search": ["Bm25SearchStrategy", "Bm25SearchStrategyConfig", "KeywordSearchStrategy", "SearchStrategy",
                       "StorageSearchResult"],
    "memory": ["AddMessagesContext", "AggregateMemoryError", "ExtractionConfig", "ExtractionResult",
               "ExtractionTrigger", "ExtractionTriggerContext", "Extractor", "ExtractorContext", "InjectionConfig",
               "InjectionContext", "InjectionFormatContext", "InjectionQueryContext", "InjectionTrigger",
               "IntervalTrigger", "InvocationTrigger", "MemoryAddOptions", "MemoryAddToolConfig",
               "MemoryContentBlockType", "MemoryEntry", "MemoryInjectionConfig", "MemoryManager",
               "MemoryManagerConfig", "MemoryMessageFilter", "MemorySearchOptions", "MemoryStore", "MemoryStoreConfig",
               "MemoryToolConfig", "ModelExtractor", "SearchOptions"],
    "vended_memory_stores": ["BedrockKnowledgeBaseStore", "FileMemoryStore", "TestMemoryStore"],
    "vended_plugins.steering": ["Guide", "Interrupt", "LLMPromptMapper", "LLMSteeringHandler", "LedgerAfterToolCall",
                                "LedgerBeforeToolCall", "LedgerProvider", "ModelSteeringAction", "Proceed",
                                "SteeringContextCallback", "SteeringContextProvider", "SteeringHandler",
                                "ToolSteeringAction"],
    "vended_plugins.steering.core": ["Guide", "Interrupt", "ModelSteeringAction", "Proceed", "SteeringContext",
                                     "SteeringContextCallback", "SteeringContextProvider", "SteeringHandler",
                                     "ToolSteeringAction"],
    "vended_plugins.steering.context_providers": ["LedgerAfterToolCall", "LedgerBeforeToolCall", "LedgerProvider"],
    "vended_plugins.steering.handlers": [],
    "experimental": ["checkpoint", "config_to_agent", "context_manager", "steering", "tools"],
    "experimental.checkpoint": ["CHECKPOINT_SCHEMA_VERSION", "Checkpoint", "CheckpointPosition"],
    "experimental.hooks": ["AfterModelInvocationEvent", "AfterToolInvocationEvent", "BeforeModelInvocationEvent",
                           "BeforeToolInvocationEvent"],
    "experimental.hooks.multiagent": ["AfterMultiAgentInvocationEvent", "AfterNodeCallEvent",
                                      "BeforeMultiAgentInvocationEvent", "BeforeNodeCallEvent",
                                      "MultiAgentInitializedEvent"],
}
_CONTEXT_PROVIDERS = {"SteeringContextCallback", "SteeringContextProvider"}
_LEDGER = {"LedgerAfterToolCall", "LedgerBeforeToolCall", "LedgerProvider"}
NOT_PROVIDED = {
    "vended_interventions": {"CedarAuthorization"},
    "vended_memory_stores": {"BedrockKnowledgeBaseStore"},
    "vended_plugins.steering": {*_CONTEXT_PROVIDERS, *_LEDGER, "LLMPromptMapper", "LLMSteeringHandler"},
    "vended_plugins.steering.core": _CONTEXT_PROVIDERS,
    "vended_plugins.steering.context_providers": _LEDGER,
    "experimental": {"context_manager"},
}


@contextmanager
def _deprecations_ignored() -> Iterator[None]:
    # Strands' experimental aliases warn when used, and so do ray_harness's (tests/unit/test_strands_import_paths.py)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


@pytest.mark.parametrize("module", sorted(VENDED))
def test_a_switched_vended_import_finds_every_name(module: str) -> None:
    with _deprecations_ignored():
        ours = importlib.import_module(f"ray_harness.{module}")
        missing = [name for name in VENDED[module] if name not in NOT_PROVIDED.get(module, set()) and
                   not hasattr(ours, name)]
    assert not missing, f"ray_harness.{module} lacks {missing}"


def test_the_names_left_out_fail_at_once() -> None:
    from ray_harness import vended_interventions

    with pytest.raises(ImportError, match="CedarAuthorization"):
        vended_interventions.CedarAuthorization  # noqa: B018 - the attribute access is the test
    from ray_harness import vended_memory_stores

    with pytest.raises(ImportError, match="BedrockKnowledgeBaseStore"):
        vended_memory_stores.BedrockKnowledgeBaseStore  # noqa: B018


@pytest.mark.parametrize("module", [module for module in sorted(NOT_PROVIDED) if module.startswith("vended_plugins.")])
def test_the_steering_names_left_out_fail_at_once_saying_so(module: str) -> None:
    ours = importlib.import_module(f"ray_harness.{module}")
    for name in NOT_PROVIDED[module]:
        with pytest.raises(ImportError, match=f"does not provide Strands' {name}"):
            getattr(ours, name)
    assert NOT_PROVIDED[module].isdisjoint(ours.__all__)  # a star import works


def test_the_lazily_loaded_strands_names_are_here_too() -> None:
    # Strands keeps these out of __all__ and loads them on first access (they need its optional extras).
    from ray_harness import vended_tools

    assert {"web_fetch", "make_web_fetch", "make_a2a_client"} <= set(vars(vended_tools))
    assert {"web_fetch", "make_web_fetch", "make_a2a_client"}.isdisjoint(vended_tools.__all__)
    assert vended_tools.web_fetch.tool_name == "web_fetch"  # the tool, not its module


@pytest.mark.parametrize("module", sorted(VENDED))
def test_the_lists_are_strands_own(module: str) -> None:
    pytest.importorskip("strands")  # a bench dependency: without it the literal lists above stand
    with _deprecations_ignored():
        theirs = importlib.import_module(f"strands.{module}")
    assert sorted(theirs.__all__) == sorted(VENDED[module])
