"""Strands' deep import paths, switched to ``ray_harness``, give the very objects ray_harness's packages hold.

Strands' guides and most programs written for it import from modules below the packages
(``from strands.session.file_session_manager import FileSessionManager``); a program switched by replacing
``strands`` with ``ray_harness`` must import, and get the same classes, not copies.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from typing import Any

import pytest

import ray_harness
from ray_harness import (
    agent,
    checkpoint as checkpoints,
    handlers,
    hooks,
    middleware,
    models,
    plugins,
    sandbox,
    session,
    steering,
    telemetry,
    tools,
    vended_tools,
)
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
    ("strands.vended_plugins.steering", ["SteeringHandler"], steering),
    ("strands.vended_plugins.steering.core", ["SteeringHandler", "SteeringContext"], steering),
    ("strands.vended_plugins.steering.core.handler", ["SteeringHandler"], steering),
    ("strands.vended_plugins.steering.core.context", ["SteeringContext"], steering),
    ("strands.experimental.checkpoint", ["Checkpoint", "CheckpointPosition", "CHECKPOINT_SCHEMA_VERSION"],
     checkpoints),
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


# Strands' steering decisions under their Strands names: (module below ray_harness, Strands' name, ray_harness's own)
RENAMED = [(module, name, own) for module in ("vended_plugins.steering", "vended_plugins.steering.core",
                                              "vended_plugins.steering.core.action")
           for name, own in (("Proceed", steering.SteerProceed), ("Interrupt", steering.SteerInterrupt),
                             ("ToolSteeringAction", steering.SteeringAction))]


@pytest.mark.parametrize(("module", "name", "own"), RENAMED, ids=[f"{m}:{n}" for m, n, _ in RENAMED])
def test_strands_steering_decisions_are_ray_harness_own_under_strands_names(module: str, name: str, own: Any) -> None:
    ours = importlib.import_module(f"ray_harness.{module}")
    assert getattr(ours, name) is own
    assert name in ours.__all__


def test_a_strands_guide_is_a_steer_guide_built_from_its_reason() -> None:
    from ray_harness.testing import ScriptedModel, text, tool_call
    from ray_harness.vended_plugins.steering import Guide, Proceed, SteeringHandler
    from ray_harness.vended_plugins.steering.core import ModelSteeringAction

    guide = Guide(reason="use the other tool")
    assert isinstance(guide, steering.SteerGuide) and guide.message == guide.reason == "use the other tool"
    assert set(ModelSteeringAction.__args__) == {steering.SteerProceed, steering.SteerGuide}

    @ray_harness.tool
    def erase(path: str) -> str:
        """Erase a file."""
        return f"erased {path}"

    class NoErasing(SteeringHandler):
        def steer_before_tool(self, event: hooks.BeforeToolCallEvent) -> object:
            return Guide(reason="use the other tool") if event.tool_use["name"] == "erase" else Proceed(reason="ok")

    agent = ray_harness.Agent(ScriptedModel(tool_call("erase", {"path": "a"}), text("done")), tools=[erase],
                              hooks=[NoErasing()])
    agent("clean up")
    assert agent.messages[2]["content"][0]["toolResult"]["content"][0]["text"] == "use the other tool"


# Strands' deprecated experimental aliases: (module below ray_harness, Strands' name, ray_harness's own object)
MOVED = [
    ("experimental.hooks", "BeforeToolInvocationEvent", hooks.BeforeToolCallEvent),
    ("experimental.hooks", "AfterToolInvocationEvent", hooks.AfterToolCallEvent),
    ("experimental.hooks", "BeforeModelInvocationEvent", hooks.BeforeModelCallEvent),
    ("experimental.hooks", "AfterModelInvocationEvent", hooks.AfterModelCallEvent),
    ("experimental.tools", "ToolProvider", tools.ToolProvider),
    ("experimental.tools", "stop", vended_tools.stop),
    ("experimental.tools", "make_stop", vended_tools.make_stop),
    ("experimental.steering", "SteeringHandler", steering.SteeringHandler),
    ("experimental.steering", "Proceed", steering.SteerProceed),
    ("experimental.steering", "Interrupt", steering.SteerInterrupt),
    ("experimental.steering", "ToolSteeringAction", steering.SteeringAction),
]
MOVED_LEFT_OUT = ["SteeringContextCallback", "SteeringContextProvider", "LedgerBeforeToolCall", "LedgerAfterToolCall",
                  "LedgerProvider", "LLMSteeringHandler", "LLMPromptMapper"]


@pytest.mark.parametrize(("module", "name", "own"), MOVED, ids=[f"{m}:{n}" for m, n, _ in MOVED])
def test_a_deprecated_experimental_name_gives_ray_harness_own_object_and_warns(module: str, name: str,
                                                                               own: Any) -> None:
    ours = importlib.import_module(f"ray_harness.{module}")
    with pytest.deprecated_call(match=name):
        assert getattr(ours, name) is own


def test_the_experimental_steering_aliases_are_strands_own_and_the_left_out_ones_fail_saying_so() -> None:
    from ray_harness.experimental import steering as experimental_steering
    from ray_harness.vended_plugins import steering as vended_steering

    with pytest.deprecated_call():
        assert experimental_steering.Guide is vended_steering.Guide
        assert experimental_steering.ModelSteeringAction is vended_steering.ModelSteeringAction
    for name in MOVED_LEFT_OUT:
        with pytest.raises(ImportError, match=f"does not provide Strands' {name}"):
            getattr(experimental_steering, name)
    aliased = {name for module, name, _ in MOVED if module == "experimental.steering"}
    assert aliased | {"Guide", "ModelSteeringAction"} == set(vended_steering.__all__)  # every name is checked
    pytest.importorskip("strands")
    import strands.experimental.steering as theirs
    import strands.vended_plugins.steering as their_vended

    assert theirs.__all__ == [] and experimental_steering.__all__ == ()
    with pytest.deprecated_call():  # Strands serves exactly the names of its vended steering, as ray_harness does
        assert all(getattr(theirs, name) is getattr(their_vended, name) for name in their_vended.__all__)


def test_the_multiagent_events_module_warns_when_imported_and_holds_the_hooks_events() -> None:
    sys.modules.pop("ray_harness.experimental.hooks.multiagent", None)
    with pytest.deprecated_call(match="ray_harness.hooks"):
        multiagent = importlib.import_module("ray_harness.experimental.hooks.multiagent")
    for name in multiagent.__all__:
        assert getattr(multiagent, name) is getattr(hooks, name), name


def test_the_experimental_submodules_are_attributes_of_the_package() -> None:
    from ray_harness import experimental

    assert experimental.checkpoint.Checkpoint is checkpoints.Checkpoint
    assert experimental.steering is importlib.import_module("ray_harness.experimental.steering")
    with pytest.raises(AttributeError, match="context_manager"):
        experimental.context_manager  # noqa: B018 - the attribute access is the test


def test_importing_ray_harness_and_its_packages_loads_none_of_these_paths() -> None:
    code = ("import sys, ray_harness, ray_harness.experimental, ray_harness.vended_plugins, ray_harness.hooks\n"
            "print(' '.join(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    paths = ("ray_harness.vended_plugins.steering", "ray_harness.experimental.steering",
             "ray_harness.experimental.hooks", "ray_harness.experimental.checkpoint", "ray_harness.experimental.tools",
             "ray_harness.steering")
    assert not [m for m in done.stdout.split() if m.startswith(paths)]
