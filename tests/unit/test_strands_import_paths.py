"""Strands' deep import paths, switched to ``ray_harness``, give the very objects ray_harness's packages hold.

Strands' guides and most programs written for it import from modules below the packages
(``from strands.session.file_session_manager import FileSessionManager``); a program switched by replacing
``strands`` with ``ray_harness`` must import, and get the same classes, not copies.
"""

from __future__ import annotations

import importlib

import pytest

import ray_harness
from ray_harness import agent, handlers, middleware, models, plugins, sandbox, session, telemetry, tools
from ray_harness.agent import conversation_manager
from ray_harness.multiagent import graph_model as multiagent_graph
from ray_harness.tools import executors, mcp
from ray_harness.types import content

# (Strands' module, the names a Strands program imports from it, the ray_harness package that holds them)
PATHS = [
    ("strands.agent.base", ["AgentBase"], agent),
    ("strands.agent.agent_metadata", ["AgentMetadata"], agent),
    ("strands.agent.agent_result", ["AgentResult"], agent),
    ("strands.agent.conversation_manager.conversation_manager", ["ConversationManager"], conversation_manager),
    ("strands.agent.conversation_manager.null_conversation_manager", ["NullConversationManager"],
     conversation_manager),
    ("strands.agent.conversation_manager.sliding_window_conversation_manager", ["SlidingWindowConversationManager"],
     conversation_manager),
    ("strands.agent.conversation_manager.summarizing_conversation_manager", ["SummarizingConversationManager"],
     conversation_manager),
    ("strands.handlers.callback_handler", ["PrintingCallbackHandler", "CompositeCallbackHandler",
                                           "null_callback_handler"], handlers),
    ("strands.middleware.stages", ["InvokeModelContext", "InvokeModelResult", "ExecuteToolContext",
                                   "ExecuteToolResult", "MiddlewareInterruptResult"], middleware),
    ("strands.multiagent", ["EdgeCondition", "EdgeConditionWithContext"], multiagent_graph),
    ("strands.multiagent.graph", ["EdgeCondition", "EdgeConditionWithContext"], multiagent_graph),
    ("strands.models.model", ["Model", "CacheConfig", "CacheToolsConfig"], models),
    ("strands.models.routing", ["ModelRouter", "RoutingCandidate", "CandidateInput", "FallbackStrategy",
                                "ClassifierStrategy", "RoutingStrategy", "RoutingContext", "RoutingAttempt"], models),
    ("strands.models.routing.router", ["ModelRouter", "RoutingCandidate", "CandidateInput"], models),
    ("strands.models.routing.strategy", ["RoutingStrategy", "RoutingContext", "RoutingAttempt"], models),
    ("strands.models.routing.fallback_strategy", ["FallbackStrategy"], models),
    ("strands.models.routing.classifier_strategy", ["ClassifierStrategy"], models),
    ("strands.plugins", ["MultiAgentPlugin", "Plugin", "hook"], plugins),
    ("strands.plugins.plugin", ["Plugin"], plugins),
    ("strands.plugins.multiagent_plugin", ["MultiAgentPlugin"], plugins),
    ("strands.plugins.decorator", ["hook"], plugins),
    ("strands.sandbox.not_a_sandbox_local_environment", ["NotASandboxLocalEnvironment"], sandbox),
    ("strands.session.file_session_manager", ["FileSessionManager"], session),
    ("strands.session.repository_session_manager", ["RepositorySessionManager"], session),
    ("strands.session.s3_session_manager", ["S3SessionManager"], session),
    ("strands.session.session_manager", ["SessionManager"], session),
    ("strands.session.session_repository", ["SessionRepository"], session),
    ("strands.telemetry.tracer", ["Tracer", "get_tracer"], telemetry),
    ("strands.tools.executors.concurrent", ["ConcurrentToolExecutor"], executors),
    ("strands.tools.executors.sequential", ["SequentialToolExecutor"], executors),
    ("strands.tools.mcp.mcp_client", ["MCPClient"], mcp),
    ("strands.tools.mcp.mcp_agent_tool", ["MCPAgentTool"], mcp),
    ("strands.tools.tool_provider", ["ToolProvider"], tools),
    ("strands.tools.tools", ["PythonAgentTool", "normalize_schema", "normalize_tool_spec"], tools),
    ("strands.types.exceptions", ["MCPClientInitializationError"], mcp),
    ("strands.types.interrupt", ["InterruptResponse", "InterruptResponseContent"], content),
    ("strands.types.tools", ["ToolUse", "ToolResult", "ToolResultContent", "ToolResultStatus", "ImageContent",
                             "DocumentContent"], content),
    ("strands.types.tools", ["ToolContext", "AgentTool"], tools),
]


@pytest.mark.parametrize(("strands_module", "names", "package"), PATHS,
                         ids=[f"{path}:{names[0]}" for path, names, _ in PATHS])
def test_a_switched_deep_import_gives_the_packages_objects(strands_module: str, names: list[str],
                                                           package: object) -> None:
    module = importlib.import_module("ray_harness" + strands_module.removeprefix("strands"))
    for name in names:
        assert getattr(module, name) is getattr(package, name), name
        assert name in module.__all__, name  # a star import and type checkers see it


def test_tool_types_module_names_only_what_it_has() -> None:
    from ray_harness.types import tools as tool_types

    with pytest.raises(AttributeError, match="ToolWatcher"):
        tool_types.ToolWatcher  # noqa: B018 - the attribute access is the test
    assert tool_types.ToolContext is ray_harness.ToolContext


def test_every_agent_kind_is_an_agent_base() -> None:
    from ray_harness import AgentBase
    from ray_harness.multiagent import GraphBuilder
    from ray_harness.testing import ScriptedModel

    builder = GraphBuilder()
    builder.add_node(ray_harness.Agent(ScriptedModel()), "only")
    assert isinstance(ray_harness.Agent(ScriptedModel()), AgentBase)
    assert isinstance(builder.build(runtime="local"), AgentBase)  # a graph nests where an agent goes
    assert not isinstance(ScriptedModel(), AgentBase)
