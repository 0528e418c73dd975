"""``ray-harness serve``: an agent/graph/swarm over A2A 1.0 on Ray Serve."""

from __future__ import annotations

import argparse
import logging
import os

from ray_harness.cli._options import Commands, init_ray, positive_int

__all__ = ("add_serve",)


def add_serve(commands: Commands) -> None:
    serve = commands.add_parser("serve", help="serve an agent/graph/swarm over A2A 1.0 on Ray Serve",
                                description="Serves the target over A2A 1.0 until Ctrl-C, and prints its URL and "
                                            "its agent card's. Joins --address (else RAY_ADDRESS) when given, else "
                                            "starts an embedded local Ray. Example: ray-harness serve "
                                            "my_pkg.agents:build_support --replicas 2 --task-store "
                                            "file:///var/lib/a2a")
    serve.add_argument("target", help="module:function building an Agent, Graph or Swarm per task")
    serve.add_argument("--host", default="127.0.0.1",
                       help="interface the HTTP proxy listens on (default 127.0.0.1: this machine only; 0.0.0.0: "
                            "every interface)")
    serve.add_argument("--port", type=_port, default=8000, help="its port (default 8000)")
    serve.add_argument("--name", help="app and card name: letters, digits, '_', '.', '-', up to 64 (default: the "
                                      "function's name without 'build_')")
    serve.add_argument("--replicas", type=positive_int, default=1,
                       help="replicas serving it (default 1); with more, give --task-store so that a task "
                            "waiting for input can be answered on any of them")
    serve.add_argument("--task-store", help="where tasks and conversations are kept: file:///abs/dir or "
                                            "s3://bucket/prefix (default: each replica's memory)")
    serve.add_argument("--max-contexts", type=positive_int, default=None, metavar="N",
                       help="conversations (contextId) kept; beyond N the least recently used idle one is "
                            "forgotten (default 1000)")
    serve.add_argument("--address", default=None,
                       help="the cluster to serve on: its GCS address host:port, as `ray start --head` prints it, "
                            "or ray://host:10001 (default RAY_ADDRESS, else an embedded local Ray)")
    serve.add_argument("--auth-token-env", metavar="VAR", help="require the bearer token held in this variable")
    serve.set_defaults(handler=_serve)


def _port(text: str) -> int:
    """An argparse type: a TCP port, refused before Ray starts (Ray Serve's proxy failed to bind it much later)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 1 to 65535, got {value}")
    return value


_FLAGS = {"name": "--name", "num_replicas": "--replicas", "task_store": "--task-store", "max_contexts": "--max-contexts",
          "auth_token": "--auth-token-env"}
"""The ``serve.app()`` argument each flag sets: its errors name the argument, the user typed the flag."""


def _in_flag_terms(message: str, *, name_given: bool) -> str:
    """``message`` (from ``serve.app()``, naming its argument first) naming the flag instead."""
    argument, _, rest = message.partition(" ")
    if argument == "name" and not name_given:
        return f"the app name made from the target's function name is not valid ({message}): give one with --name"
    flag = _FLAGS.get(argument)
    return f"{flag} {rest}" if flag else message


def _serve(args: argparse.Namespace) -> int:
    import re

    from ray_harness import serve

    token = None
    if args.auth_token_env:
        token = os.environ.get(args.auth_token_env)
        if not token:
            raise ValueError(f"--auth-token-env {args.auth_token_env}: the variable is not set or empty")
    name = args.name or re.sub(r"[^A-Za-z0-9_.-]", "_", args.target.rpartition(":")[2].removeprefix("build_"))
    # Only the options given: serve.app() keeps its defaults (one place for them).
    options = {"max_contexts": args.max_contexts} if args.max_contexts is not None else {}
    try:
        application = serve.app(args.target, name=name, num_replicas=args.replicas, task_store=args.task_store,
                                auth_token=token, **options)
    except ValueError as error:
        raise ValueError(_in_flag_terms(str(error), name_given=args.name is not None)) from None
    if args.address:
        init_ray(args.address)  # checked in seconds (as status/cancel/jobs do); serve.run() then finds Ray joined
    # This command's output is its banner: Ray Serve's INFO lines in this process ("Started Serve", "Application
    # ... is ready", a confusing "New http_options ... will not be applied") repeat it or are noise.
    logging.getLogger("ray.serve").setLevel(logging.WARNING)
    handle = serve.run(application, host=args.host, port=args.port)
    print(f"serving {name} over A2A at {handle.url} (card: {handle.card_url}); Ctrl-C stops", flush=True)
    serve.serve_until_stopped(handle)
    return 0
