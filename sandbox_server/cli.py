"""`agentrl sandbox serve`: the sandbox server on the command line (imports nothing heavy until run).

    agentrl sandbox serve                          # one process at http://127.0.0.1:8090
    agentrl sandbox serve --processes auto         # one per core; clients use http://127.0.0.1:8090/v1/cluster
    agentrl sandbox cluster roll --within 60       # restart each of those servers in turn, sandboxes in use
"""

from __future__ import annotations

import argparse
import os
import sys

from agentrl.serving.commands import add_commands


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    sandbox = subparsers.add_parser("sandbox", help="the Docker sandbox server")
    commands = sandbox.add_subparsers(dest="sandbox_command", required=True)
    serve = commands.add_parser("serve", help="serve sandboxes over HTTP (REST + SandboxFusion /run_code)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8090)
    serve.add_argument(
        "--token",
        default=os.environ.get("AGENTRL_SANDBOX_TOKEN"),
        help="bearer token every call must carry (default: $AGENTRL_SANDBOX_TOKEN; none: open)",
    )
    serve.add_argument(
        "--tenant",
        action="append",
        default=[],
        metavar="NAME=TOKEN[:MAX]",
        help="a tenant, its bearer token and its quota: the most sandboxes it may hold, its /run_code "
        "calls under way included (repeatable); a tenant sees and touches only its own sandboxes",
    )
    serve.add_argument(
        "--allow-image",
        action="append",
        default=[],
        metavar="IMAGE",
        help="an image callers may ask for besides the default one (repeatable)",
    )
    serve.add_argument(
        "--max-pending", type=int, default=8, help="calls running or waiting per sandbox; more get 429"
    )
    serve.add_argument(
        "--backend",
        choices=("docker", "local"),
        default="docker",
        help="local = NOT ISOLATED child processes, for development only",
    )
    serve.add_argument("--image", default=None, help="default sandbox image")
    serve.add_argument("--pool-size", type=int, default=4, help="pre-started containers kept per shape")
    serve.add_argument("--max-sandboxes", type=int, default=256)
    serve.add_argument(
        "--max-request-mb", type=int, default=64, help="the largest upload (PUT of a file) or download"
    )
    serve.add_argument(
        "--max-json-mb", type=int, default=16, help="the largest JSON request (exec with stdin, /run_code)"
    )
    serve.add_argument(
        "--max-output-mb", type=int, default=16, help="the largest max_output_bytes of an exec"
    )
    serve.add_argument(
        "--heavy-calls", type=int, default=4, help="calls over 1 MiB (body or output cap) at once; more wait"
    )
    serve.add_argument("--log-level", default="warning")
    serve.add_argument(
        "--processes",
        default=None,
        metavar="N|auto",
        help="N sandbox servers (auto: one per core) behind this address, which then serves only "
        "GET /v1/cluster; clients call the server a sandbox id names (SandboxCluster does)",
    )
    serve.add_argument(
        "--holder",
        default=None,
        help="this server's name, at the head of its sandbox ids (`<holder>.<hex>`); with --processes, "
        "the base of its servers' names (default: sbx-<port>)",
    )
    serve.set_defaults(handler=serve_main)
    cluster = commands.add_parser(
        "cluster", help="show, scale up, drain or restart (roll) the servers of `serve --processes`"
    )
    add_commands(
        cluster.add_subparsers(dest="cluster_command", required=True),
        held="sandboxes",
        load_field="live_sandboxes",
        default_url="http://127.0.0.1:8090",
        token_env_var="AGENTRL_SANDBOX_TOKEN",
        prog="agentrl sandbox cluster",
    )


def process_count(value: str) -> int:
    """`--processes N|auto` -> N."""
    from agentrl.sandbox_server.cluster.discovery import cpu_count

    if value == "auto":
        return cpu_count()
    if not value.isdigit() or not 1 <= int(value) <= 256:
        raise ValueError(f"--processes takes a number from 1 to 256 or auto, not {value!r}")
    return int(value)


def child_args(args: argparse.Namespace, name: str, port: int) -> list[str]:
    """The `agentrl sandbox serve` arguments of one of `--processes`' servers (its token goes by
    environment)."""
    out = ["--host", args.host, "--port", str(port), "--holder", name, "--log-level", args.log_level,
           "--max-pending", str(args.max_pending), "--backend", args.backend,
           "--pool-size", str(args.pool_size), "--max-sandboxes", str(args.max_sandboxes),
           "--max-request-mb", str(args.max_request_mb), "--max-json-mb", str(args.max_json_mb),
           "--max-output-mb", str(args.max_output_mb), "--heavy-calls", str(args.heavy_calls)]
    if args.image:
        out += ["--image", args.image]
    for tenant in args.tenant:
        out += ["--tenant", tenant]
    for image in args.allow_image:
        out += ["--allow-image", image]
    return out


def serve_processes(args: argparse.Namespace) -> int:
    import functools

    from agentrl.sandbox_server.cluster.discovery import check_holder_name
    from agentrl.sandbox_server.cluster.processes import processes_app
    from agentrl.serving.runner import run_server

    try:
        count = process_count(args.processes)
        tenants, _ = parse_tenants(args.tenant)
        base = check_holder_name(args.holder or f"sbx-{args.port}")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.backend == "docker":  # refused here, once, rather than by every child in turn
        from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend
        from agentrl.sandbox_server.wire.errors import DockerUnavailable, InvalidRequest
        from agentrl.sandbox_server.wire.models import DEFAULT_IMAGE

        try:
            DockerBackend(args.image or DEFAULT_IMAGE, pool_size=0, max_sandboxes=1).close()
        except (DockerUnavailable, InvalidRequest) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    tokens = set(tenants) | ({args.token} if args.token else set())
    app = processes_app(functools.partial(child_args, args), host=args.host, count=count, base_name=base,
                        token=args.token, tokens=tokens)
    run_server(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def parse_tenants(items: list[str]) -> tuple[dict[str, str], dict[str, int]]:
    """`--tenant NAME=TOKEN[:MAX]` values -> ({token: name}, {name: MAX}); a token may hold ':' as
    long as what follows its last one is not a number."""
    tokens: dict[str, str] = {}
    quotas: dict[str, int] = {}
    for item in items:
        name, eq, rest = item.partition("=")
        token, colon, quota = rest.rpartition(":")
        if not (colon and quota.isdigit()):
            token, quota = rest, ""
        if not (eq and name and token):
            raise ValueError(f"--tenant takes NAME=TOKEN[:MAX], not {item!r}")
        if token in tokens or name in tokens.values():
            raise ValueError(f"--tenant {name}: a tenant name and a token may each be given once")
        tokens[token] = name
        if quota:
            quotas[name] = int(quota)
    return tokens, quotas


def serve_main(args: argparse.Namespace) -> int:
    from agentrl.sandbox_server.api.app import create_app
    from agentrl.sandbox_server.cluster.discovery import check_holder_name
    from agentrl.sandbox_server.wire.errors import DockerUnavailable
    from agentrl.serving.runner import run_server

    if args.processes is not None:
        return serve_processes(args)
    if args.token is None and args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"warning: serving on {args.host} without --token: anyone who reaches it can run code",
            file=sys.stderr,
        )
    try:
        if args.backend == "local":
            from agentrl.sandbox_server.sandboxes.local_backend import LocalBackend

            backend = LocalBackend(max_sandboxes=args.max_sandboxes)
        else:
            from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend
            from agentrl.sandbox_server.wire.models import DEFAULT_IMAGE

            backend = DockerBackend(
                args.image or DEFAULT_IMAGE, pool_size=args.pool_size, max_sandboxes=args.max_sandboxes
            )
    except DockerUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        tenants, quotas = parse_tenants(args.tenant)
        if args.holder is not None:
            backend.id_prefix = check_holder_name(args.holder) + "."
    except ValueError as exc:
        backend.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    app = create_app(
        backend,
        token=args.token,
        tokens=tenants,
        allowed_images=args.allow_image,
        max_request_bytes=args.max_request_mb << 20,
        max_json_bytes=args.max_json_mb << 20,
        max_output_bytes=args.max_output_mb << 20,
        heavy_calls=args.heavy_calls,
        quotas=quotas,
        max_pending=args.max_pending,
    )
    try:
        run_server(app, host=args.host, port=args.port, log_level=args.log_level, access_log=True)
    finally:
        backend.close()
    return 0
