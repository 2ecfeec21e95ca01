"""``agac emulator``: run the provider emulator, or print the exports that point at it."""

from __future__ import annotations

import click

from agac.emulator.env import exports
from agac.installing import install_hint

try:  # starlette and uvicorn come with the `emulator` extra; `env` works without them.
    from agac.emulator.server import check_port, serve
except ImportError:  # pragma: no cover - exercised only without the extra
    serve = None  # type: ignore[assignment]

__all__ = ["emulator"]


@click.group(invoke_without_command=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8765, show_default=True, type=int, help="Port to serve on.")
@click.option(
    "--latency-ms", default=0, show_default=True, type=int, help="Delay before each live answer."
)
@click.option(
    "--batch-seconds",
    default=60.0,
    show_default=True,
    type=float,
    help="Emulator time a batch takes to end (0: at once).",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=int,
    help="Varies every answer; the same seed gives the same answers.",
)
@click.pass_context
def emulator(
    ctx: click.Context, host: str, port: int, latency_ms: int, batch_seconds: float, seed: int
) -> None:
    """Serve OpenAI, Anthropic, Gemini, Groq and Ollama's wire protocols on one port.

    Point a workflow at it with: eval "$(agac emulator env --port 8765)"
    """
    if ctx.invoked_subcommand is None:
        if serve is None:
            raise click.ClickException(
                f"the emulator needs starlette and uvicorn: {install_hint('emulator')}"
            )
        check_port(host, port)  # a port in use is an error (exit 2), not an announced URL
        click.echo(f"agac emulator on http://{host}:{port} (Ctrl-C stops it)", err=True)
        serve(host=host, port=port, latency_ms=latency_ms, batch_seconds=batch_seconds, seed=seed)


@emulator.command("env")
@click.option(
    "--port", default=8765, show_default=True, type=int, help="Port of the running emulator."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Its host.")
def env(port: int, host: str) -> None:
    """Print shell exports: base URLs and dummy keys, and a key file for Vertex AI."""
    click.echo(exports(port, host), nl=False)
