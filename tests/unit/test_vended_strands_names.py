"""The vended packages a Strands program imports exist under ``ray_harness`` with every public name Strands' have.

Listed literally (Strands 1.62's ``__all__``), so the test runs without Strands; with Strands installed it also
checks the lists are still Strands' own. What ray_harness leaves out on purpose is listed as such.
"""

from __future__ import annotations

import importlib

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
}
NOT_PROVIDED = {
    "vended_interventions": {"CedarAuthorization"},
    "vended_memory_stores": {"BedrockKnowledgeBaseStore"},
}


@pytest.mark.parametrize("module", sorted(VENDED))
def test_a_switched_vended_import_finds_every_name(module: str) -> None:
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


def test_the_lazily_loaded_strands_names_are_here_too() -> None:
    # Strands keeps these out of __all__ and loads them on first access (they need its optional extras).
    from ray_harness import vended_tools

    assert {"web_fetch", "make_web_fetch", "make_a2a_client"} <= set(vars(vended_tools))
    assert {"web_fetch", "make_web_fetch", "make_a2a_client"}.isdisjoint(vended_tools.__all__)
    assert vended_tools.web_fetch.tool_name == "web_fetch"  # the tool, not its module


@pytest.mark.parametrize("module", sorted(VENDED))
def test_the_lists_are_strands_own(module: str) -> None:
    pytest.importorskip("strands")  # a bench dependency: without it the literal lists above stand
    theirs = importlib.import_module(f"strands.{module}")
    assert sorted(theirs.__all__) == sorted(VENDED[module])
