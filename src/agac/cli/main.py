"""The ``agac`` command: parse, call one library function, render, map to an exit code.

Heavy modules (the engine, SQLAlchemy, Rich, the SDKs) are imported inside the
commands that need them, so ``agac --version`` and ``agac validate`` start fast.
Every command takes ``--json``: then stdout carries exactly one JSON document and
everything else goes to stderr.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from typing import Any, ClassVar, NoReturn

import click

from agac import __version__
from agac.cli.failures import report
from agac.cli.streams import json_stdout
from agac.jsontext import strict_dumps

__all__ = ["cli", "main"]

WF_HELP = "a workflow file path or its name:"


def _emit_json(value: Any) -> None:
    """The command's one JSON document, strict JSON (no NaN or Infinity); a typed report
    (a run's summary, status, cost) made JSON here, at the ``--json`` edge."""
    from agac.engine.report.jsondoc import document

    click.echo(strict_dumps(document(value), indent=2, default=str))


def _report(result: Any, as_json: bool) -> int:
    """Notes on stderr, then the run summary (one JSON object with --json); the exit code."""
    from agac.cli.report import print_summary

    for note in result.notes:
        click.echo(note, err=True)
    if as_json:
        _emit_json(result.summary)
    else:
        print_summary(result.summary, interrupted=result.interrupted)
    return int(result.exit_code)


def command(fn: Callable[..., int | None]) -> Callable[..., None]:
    """Run a command body inside the error boundary (:mod:`agac.cli.failures`): whatever
    it raises becomes a message naming the fix (JSON on stdout with ``--json``) and an
    exit code, never a traceback."""

    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            code = fn(*args, **kwargs)
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - the boundary
            sys.exit(report(exc, bool(kwargs.get("as_json"))))
        sys.exit(code or 0)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print exactly one JSON document on stdout, also when the command fails "
    '({"ok": false, "error": ...}); notes and progress go to stderr.',
)


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """A positive duration option in seconds; usage error (exit 2) naming the format."""
    from agac.config import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value, positive=True)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc


tenant_option = click.option(
    "--tenant",
    metavar="T",
    default=None,
    help="The tenant to act in: its runs are found and new runs admitted in it (else "
    "AGAC_TENANT, else tenant: in agac.yml, else default).",
)

run_mode_option = click.option(
    "--run-mode",
    type=str,
    default=None,
    help="online|batch|flex|auto for every llm action without its own.",
)
poll_interval_option = click.option(
    "--poll-interval",
    metavar="D",
    default=None,
    callback=_duration,
    help="How often batched actions without their own poll_interval ask the provider (30s, 5m).",
)
batch_deadline_option = click.option(
    "--batch-deadline",
    metavar="D",
    default=None,
    callback=_duration,
    help="When batched actions without their own batch_deadline give a batch up (25h).",
)


def admission_options(f: Any) -> Any:
    """``--new``, ``--fresh`` and ``--limit``: how ``agac run`` and ``agac submit`` admit."""
    f = click.option(
        "--limit", type=click.IntRange(min=1), default=None, help="Admit only the first N records."
    )(f)
    f = click.option(
        "--fresh",
        is_flag=True,
        help="Like --new, and reuse nothing: every record is paid for again.",
    )(f)
    return click.option(
        "--new", is_flag=True, help="End the open run (cancelled) and admit a new one."
    )(f)


def budget_options(f: Any) -> Any:
    """``--budget-usd`` and ``--allow-over-estimate`` (R5) of ``agac run`` and ``agac submit``."""
    f = click.option(
        "--allow-over-estimate",
        is_flag=True,
        help="Admit a run whose estimate exceeds its budget (it stops when the budget is spent).",
    )(f)
    return click.option(
        "--budget-usd",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="USD",
        help="Cap a new run's spending (instead of the file's budget.usd).",
    )(f)


class _AgacGroup(click.Group):
    """The ``agac`` group; commands in :attr:`LAZY` are imported on first use.

    The emulator pulls in its web server, which ``agac run`` has no use for; ``batch``,
    the workers' and people's commands build on this module's helpers (``command``,
    ``json_option``), so they are loaded after it. Both are still listed by ``agac --help`` and resolved like any other command.
    """

    LAZY: ClassVar[dict[str, str]] = {
        "emulator": "agac.cli.emulator",
        "batch": "agac.cli.batch",
        "submit": "agac.cli.workers",
        "worker": "agac.cli.workers",
        "workers": "agac.cli.workers",
        "effects": "agac.cli.people",
        "approvals": "agac.cli.people",
        "approve": "agac.cli.people",
        "reject": "agac.cli.people",
        "revise": "agac.cli.people",
        "users": "agac.cli.team",
        "tokens": "agac.cli.team",
        "serve": "agac.cli.serve",
        "export": "agac.cli.export",
        "pilot": "agac.cli.quality",
        "compare": "agac.cli.quality",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Click's main, with usage errors and anything raised outside a command body
        (an option's check, a lazy import) reported by the same boundary as the
        commands' own failures: with ``--json`` stdout still holds one JSON document
        (and only agac writes to it: :mod:`agac.cli.streams`)."""
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
        with json_stdout("--json" in argv):
            self._main(argv, prog_name, complete_var, **extra)

    def _main(
        self, argv: list[str], prog_name: str | None, complete_var: str | None, **extra: Any
    ) -> NoReturn:
        try:
            code = super().main(argv, prog_name, complete_var, False, **extra)
        except click.ClickException as exc:
            exc.show()
            if "--json" in argv:
                failure = {
                    "code": "usage_error",
                    "message": exc.format_message(),
                    "hint": "see `agac COMMAND --help`",
                }
                click.echo(json.dumps({"ok": False, "error": failure}, indent=2))
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("agac: interrupted", err=True)
            sys.exit(130)
        except Exception as exc:  # noqa: BLE001 - the boundary
            sys.exit(report(exc, "--json" in argv))
        sys.exit(code or 0)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            module = importlib.import_module(self.LAZY[cmd_name])
            self.add_command(getattr(module, cmd_name))
        return super().get_command(ctx, cmd_name)


@click.group(cls=_AgacGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agac")
def cli() -> None:
    """agac runs declarative LLM workflows over record sets, online or through provider
    batch APIs, with durable, resumable, accounted runs."""


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--example", default="quickstart", show_default=True, help="Which bundled example.")
@json_option
@command
def init(directory: str, example: str, as_json: bool) -> int:
    """Create a project in DIRECTORY with an example workflow and its data (never overwrites)."""
    from agac.examples import init_project

    created, kept = init_project(directory, example)
    if as_json:
        _emit_json({"directory": directory, "created": created, "kept": kept})
    else:
        for path in created:
            click.echo(f"created {path}")
        for path in kept:
            click.echo(f"kept    {path} (exists)")
    return 0


@cli.command()
@click.argument("workflow")
@run_mode_option
@poll_interval_option
@batch_deadline_option
@click.option(
    "--sample",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    metavar="N",
    help="Read the input's first N records to check id_field and the "
    "source fields the templates read (0: do not read the input).",
)
@json_option
@command
def validate(
    workflow: str,
    run_mode: str | None,
    poll_interval: float | None,
    batch_deadline: float | None,
    sample: int,
    as_json: bool,
) -> int:
    """Check a workflow and its input; report every error with file, line and code (exit 2
    on errors)."""
    from agac import api

    wf, problems = api.validate(
        workflow,
        run_mode=run_mode,
        poll_interval=poll_interval,
        batch_deadline=batch_deadline,
        sample=sample,
    )
    errors = [p for p in problems if p.severity == "error"]
    if as_json:
        _emit_json(
            {
                "ok": not errors,
                "workflow": wf.name if wf else None,
                "errors": [p.to_dict() for p in errors],
                "warnings": [p.to_dict() for p in problems if p.severity != "error"],
            }
        )
    else:
        for p in problems:
            click.echo(p.render(), err=True)
        if not errors and wf is not None:
            click.echo(f"{wf.name}: valid ({len(wf.actions)} actions)")
    return 2 if errors else 0


@cli.command()
@click.option("--out", default=None, help="Write here instead of stdout.")
@command
def schema(out: str | None) -> int:
    """Print the JSON Schema of workflow files, for editors to complete and check YAML."""
    from agac.config.schema import workflow_schema_text

    if out is None:
        click.echo(workflow_schema_text(), nl=False)
    else:
        from agac.data.export import open_output

        with open_output(out) as handle:
            handle.write(workflow_schema_text())
        click.echo(f"wrote the workflow schema to {out}", err=True)
    return 0


@cli.command()
@click.argument("workflow")
@run_mode_option
@poll_interval_option
@batch_deadline_option
@admission_options
@click.option(
    "--wait",
    is_flag=True,
    help="Poll batches out every poll_interval until the run is final, and wait for "
    "another owner's lease, instead of exiting 75.",
)
@budget_options
@tenant_option
@json_option
@command
def run(
    workflow: str,
    run_mode: str | None,
    poll_interval: float | None,
    batch_deadline: float | None,
    new: bool,
    fresh: bool,
    limit: int | None,
    wait: bool,
    budget_usd: float | None,
    allow_over_estimate: bool,
    tenant: str | None,
    as_json: bool,
) -> int:
    """Run a workflow: continue its open run, or admit a new one (reusing answers)."""
    from agac import api
    from agac.cli.render import ProgressView

    view = ProgressView(enabled=True)
    try:
        result = api.run(
            workflow,
            run_mode=run_mode,
            poll_interval=poll_interval,
            batch_deadline=batch_deadline,
            budget_usd=budget_usd,
            new=new,
            fresh=fresh,
            limit=limit,
            wait=wait,
            allow_over_estimate=allow_over_estimate,
            tenant=tenant,
            handle_signals=True,
            on_start=view.start,
            on_warning=lambda line: click.echo(f"warning: {line}", err=True),
        )
    except KeyboardInterrupt:
        view.stop()
        click.echo("agac: stopped at once; the next `agac run` recovers", err=True)
        return 130
    finally:
        view.stop()
    return _report(result, as_json)


@cli.command()
@click.argument("workflow")
@run_mode_option
@click.option(
    "--budget-usd",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="USD",
    help="Judge the estimate against this cap instead of budget.usd.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N records.")
@tenant_option
@json_option
@command
def plan(
    workflow: str,
    run_mode: str | None,
    budget_usd: float | None,
    limit: int | None,
    tenant: str | None,
    as_json: bool,
) -> int:
    """Estimate a run before anything is sent: requests, tokens, cost online vs batch."""
    from agac import api
    from agac.cli.render import print_plan

    doc = api.plan(workflow, run_mode=run_mode, budget_usd=budget_usd, limit=limit, tenant=tenant)
    _emit_json(doc) if as_json else print_plan(doc)
    return 0


@cli.command()
@click.argument("workflow")
@click.option("--action", default=None, help="Only failed units of this action.")
@click.option("--record", default=None, help="Only this record key.")
@click.option("--dry-run", is_flag=True, help="Show what would be asked again; send nothing.")
@click.option(
    "--abandon-in-flight",
    is_flag=True,
    help="Retry although a batch is still out (only when the provider no longer has "
    "it); its waiting records fail batch_abandoned first.",
)
@tenant_option
@json_option
@command
def retry(
    workflow: str,
    action: str | None,
    record: str | None,
    dry_run: bool,
    abandon_in_flight: bool,
    tenant: str | None,
    as_json: bool,
) -> int:
    """Re-ask the failed units of the latest finished run (and what was skipped because of them)."""
    from agac import api
    from agac.cli.render import ProgressView, print_retry_plan

    view = ProgressView(enabled=not dry_run)
    try:
        result = api.retry(
            workflow,
            action=action,
            record=record,
            dry_run=dry_run,
            abandon_in_flight=abandon_in_flight,
            tenant=tenant,
            handle_signals=True,
            on_start=view.start,
        )
    finally:
        view.stop()
    if dry_run:
        assert isinstance(result, dict)
        if as_json:
            _emit_json(result)
        else:
            print_retry_plan(result)
        return 0
    return _report(result, as_json)


@cli.command()
@click.argument("ref", required=False)
@click.option("--follow", is_flag=True, help="Stream the run's events until it is final.")
@tenant_option
@json_option
@command
def status(ref: str | None, follow: bool, tenant: str | None, as_json: bool) -> int:
    """Show a run's summary: REF is a run id, a workflow, or nothing for the latest run."""
    from agac import api
    from agac.cli.render import follow_events
    from agac.cli.report import print_summary

    if follow:
        follow_events(ref, as_json=as_json, tenant=tenant)
    summary = api.status(ref, tenant=tenant)
    if as_json:
        _emit_json(summary)
    else:
        print_summary(summary)
    return 0


@cli.command()
@click.argument("ref", metavar="RUN|WF")
@tenant_option
@json_option
@command
def cancel(ref: str, tenant: str | None, as_json: bool) -> int:
    """End a run cancelled: its batches out are cancelled at the provider, nothing more is sent."""
    from agac import api

    result = api.cancel(ref, tenant=tenant)
    code = _report(result, as_json)
    return 0 if result.summary["state"] == "cancelled" else code


@cli.group()
def runs() -> None:
    """The history of runs."""


@runs.command("list")
@click.argument("workflow", required=False)
@click.option("--limit", default=50, show_default=True)
@tenant_option
@json_option
@command
def runs_list(workflow: str | None, limit: int, tenant: str | None, as_json: bool) -> int:
    """List runs, newest first."""
    from agac import api
    from agac.cli.render import print_runs

    rows = api.list_runs(workflow, limit=limit, tenant=tenant)
    _emit_json(rows) if as_json else print_runs(rows)
    return 0


@cli.command()
@click.argument("run_ref", metavar="[RUN|WF]", required=False)
@tenant_option
@json_option
@command
def events(run_ref: str | None, tenant: str | None, as_json: bool) -> int:
    """Print a run's event log, oldest first: id, time, kind, action, unit, data.

    RUN is a run id (or a unique prefix), WF a workflow (its latest run); with neither,
    the latest run of the project. Examples:

    \b
        agac events                      # the latest run
        agac events review_triage        # the latest run of a workflow
        agac events 6b0c1172 --json      # one run, as a JSON list

    Tracebacks of failed tools are left out here; `agac records show KEY` has them.
    """
    from agac import api
    from agac.cli.render import print_events

    rows = api.events(run_ref, tenant=tenant)
    _emit_json(rows) if as_json else print_events(rows)
    return 0


@cli.command()
@click.argument("workflow")
@click.option("--record", "record", required=True, help="The record key.")
@click.option("--action", default=None, help="Only this action.")
@tenant_option
@json_option
@command
def render(
    workflow: str, record: str, action: str | None, tenant: str | None, as_json: bool
) -> int:
    """Show the exact request that would be sent for a record, before any money is spent."""
    from agac import api
    from agac.cli.render import attachment_line, cache_line

    rows = api.render(workflow, record, action, tenant=tenant)
    if as_json:
        _emit_json(rows)
    else:
        for r in rows:
            click.echo(
                f"== {r['action']} ({r['kind']})" + (f" item {r['item']}" if r.get("item") else "")
            )
            if "note" in r:
                click.echo(f"   {r['note']}")
            if "guard" in r:
                click.echo(f"   guard: {r['guard']}")
            if "request" in r:
                for m in r["request"]["messages"]:
                    click.echo(f"-- {m['role']}:")
                    files = [attachment_line(a) for a in m.get("attachments") or ()]
                    if m.get("position") != "after":
                        click.echo("".join(f"{f}\n" for f in files), nl=False)
                    click.echo(m["content"])
                    if m.get("position") == "after":
                        click.echo("".join(f"{f}\n" for f in files), nl=False)
                params = {k: v for k, v in r["request"].items() if k not in ("messages",)}
                click.echo(f"-- params: {json.dumps(params, default=str)}")
                if r.get("cache"):
                    click.echo(f"-- cache: {cache_line(r['cache'])}")
            if "inputs" in r:
                click.echo(f"-- {r['function']}(inputs={json.dumps(r['inputs'], default=str)})")
    return 0


@cli.group()
def records() -> None:
    """Per-record sessions."""


@records.command("show")
@click.argument("key")
@click.option("--workflow", default=None)
@click.option("--run", "run_ref", default=None)
@tenant_option
@json_option
@command
def records_show(
    key: str, workflow: str | None, run_ref: str | None, tenant: str | None, as_json: bool
) -> int:
    """A record's session: history across actions, attempts, tokens, cost, status, errors."""
    from agac import api
    from agac.cli.render import print_session

    doc = api.record_session(key, workflow=workflow, run_ref=run_ref, tenant=tenant)
    _emit_json(doc) if as_json else print_session(doc)
    return 0


@records.command("list")
@click.argument("workflow")
@click.option(
    "--status",
    type=click.Choice(["answered", "failed", "skipped"]),
    default=None,
    help="Only units with this outcome.",
)
@click.option("--action", default=None, help="Only units of this action.")
@click.option("--run", "run_ref", default=None)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="At most this many units.",
)
@tenant_option
@json_option
@command
def records_list(
    workflow: str,
    status: str | None,
    action: str | None,
    run_ref: str | None,
    limit: int,
    tenant: str | None,
    as_json: bool,
) -> int:
    """Units of the latest run by outcome (fan-out items by item key), e.g. the failed ones."""
    from agac import api
    from agac.cli.render import print_records

    doc = api.list_records(
        workflow, status=status, action=action, run_ref=run_ref, limit=limit, tenant=tenant
    )
    if as_json:
        _emit_json(doc)
        return 0
    print_records(doc)
    if not doc["units"]:
        click.echo(f"no units{' ' + status if status else ''} in run {doc['run_id']}", err=True)
    if doc["truncated"]:
        click.echo(
            f"only the first {limit:,} units are listed; narrow with --action or raise "
            "--limit (agac export has every unit)",
            err=True,
        )
    return 0


@cli.command()
@click.argument("ref", required=False)
@tenant_option
@json_option
@command
def cost(ref: str | None, tenant: str | None, as_json: bool) -> int:
    """Cost per action and model, live vs batch, and what batch and caching saved."""
    from agac import api
    from agac.cli.report import print_cost

    doc = api.cost(ref, tenant=tenant)
    _emit_json(doc) if as_json else print_cost(doc)
    return 0


@cli.command()
@click.option(
    "--keep-runs",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Final runs to keep per workflow (runs not final are always kept).",
)
@json_option
@command
def gc(keep_runs: int, as_json: bool) -> int:
    """Prune old runs' outcomes and events; answers, costs, batches and effects are kept."""
    from agac import api

    doc = api.gc(keep_runs)
    if as_json:
        _emit_json(doc)
    else:
        click.echo(
            f"pruned {len(doc['pruned_runs'])} runs ({doc['deleted_outcomes']:,} outcomes, "
            f"{doc['deleted_events']:,} events, {doc['deleted_turns']:,} tool-loop turns, "
            f"{doc['deleted_records']:,} snapshot records); "
            f"kept the newest {keep_runs} final runs of each workflow and every answer"
        )
    return 0


@cli.group()
def store() -> None:
    """The store itself."""


@store.command("upgrade")
@json_option
@command
def store_upgrade(as_json: bool) -> int:
    """Create or migrate the store's schema now."""
    from agac import api

    doc = api.store_upgrade()
    _emit_json(doc) if as_json else click.echo(f"store at revision {doc['revision']}")
    return 0


@store.command("info")
@json_option
@command
def store_info(as_json: bool) -> int:
    """Where the state lives, its size; on a storage point its owner, snapshot age and log."""
    from agac import api
    from agac.cli.render import print_store_info

    doc = api.store_info()
    _emit_json(doc) if as_json else print_store_info(doc)
    return 0


def main() -> None:
    cli(prog_name="agac")


if __name__ == "__main__":  # pragma: no cover
    main()
