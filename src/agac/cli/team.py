"""``agac users …`` and ``agac tokens …``: administrator commands (T0, T1).

They write the store directly: whoever can run them holds the store (and ``AGAC_SECRET``)
and administers the project. Each makes one library call and renders it.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from agac.cli.main import _duration, _emit_json, command, json_option
from agac.errors import UsageError

__all__ = ["tokens", "users"]


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if at else "-"


def _password(from_stdin: bool) -> str:
    """The password: the first line of stdin with --password-stdin (never an argument: it
    would show in the process list and the shell's history)."""
    if not from_stdin:
        raise UsageError(
            "give the password on stdin: `printf '%s\\n' \"$PASSWORD\" | agac users "
            "… --password-stdin` (never as an argument)"
        )
    return sys.stdin.readline().rstrip("\r\n")


def _print_user(u: dict[str, Any]) -> None:
    flags = ("admin " if u["admin"] else "") + ("" if u["active"] else "DISABLED")
    click.echo(
        f"{u['name']:<20} tenants: {', '.join(u['tenants']):<24} "
        f"groups: {', '.join(u['groups']) or '-':<24} {flags}".rstrip()
    )


@click.group()
def users() -> None:
    """People who sign in to `agac serve` (administrators: whoever holds the store)."""


@users.command("add")
@click.argument("name")
@click.option(
    "--tenant",
    "tenants",
    multiple=True,
    required=True,
    metavar="T",
    help="A tenant whose runs the user sees and decides on. Repeatable.",
)
@click.option(
    "--group",
    "groups",
    multiple=True,
    metavar="G",
    help="An approver group the user is in. Repeatable.",
)
@click.option("--admin", is_flag=True, help="Mark the user an administrator in the service.")
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin's first line.")
@json_option
@command
def users_add(
    name: str,
    tenants: tuple[str, ...],
    groups: tuple[str, ...],
    admin: bool,
    password_stdin: bool,
    as_json: bool,
) -> int:
    """Add a user (Argon2-hashed password; at least 10 characters)."""
    from agac.api import people

    doc = people.users_add(
        name, _password(password_stdin), tenants=list(tenants), groups=list(groups), admin=admin
    )
    if as_json:
        _emit_json(doc)
    else:
        click.echo(f"added {doc['name']}; `agac tokens create {doc['name']}` gives it an API token")
    return 0


@users.command("list")
@json_option
@command
def users_list(as_json: bool) -> int:
    """List users with their tenants, groups and state."""
    from agac.api import people

    rows = people.users_list()
    if as_json:
        _emit_json(rows)
    elif not rows:
        click.echo("no users yet; add one with `agac users add NAME --tenant T --password-stdin`")
    for u in [] if as_json else rows:
        _print_user(u)
    return 0


@users.command("disable")
@click.argument("name")
@json_option
@command
def users_disable(name: str, as_json: bool) -> int:
    """Disable a user: its sessions end and its tokens stop working at once."""
    from agac.api import people

    doc = people.users_disable(name)
    if as_json:
        _emit_json(doc)
    else:
        click.echo(f"{name} is disabled: signed out everywhere, its tokens refused")
    return 0


@users.command("enable")
@click.argument("name")
@json_option
@command
def users_enable(name: str, as_json: bool) -> int:
    """Enable a disabled user again (its unexpired, unrevoked tokens work again)."""
    from agac.api import people

    doc = people.users_enable(name)
    if as_json:
        _emit_json(doc)
    else:
        click.echo(f"{name} is enabled")
    return 0


@users.command("set")
@click.argument("name")
@click.option(
    "--tenant",
    "tenants",
    multiple=True,
    metavar="T",
    help="Replace the user's tenants with these. Repeatable.",
)
@click.option(
    "--group",
    "groups",
    multiple=True,
    metavar="G",
    help="Replace the user's groups with these. Repeatable.",
)
@click.option("--no-groups", is_flag=True, help="Take the user out of every group.")
@click.option("--admin/--no-admin", default=None, help="Mark or unmark an administrator.")
@json_option
@command
def users_set(
    name: str,
    tenants: tuple[str, ...],
    groups: tuple[str, ...],
    no_groups: bool,
    admin: bool | None,
    as_json: bool,
) -> int:
    """Change a user's tenants, groups or administrator flag."""
    from agac.api import people

    if no_groups and groups:
        raise UsageError("--no-groups and --group contradict each other; give one")
    doc = people.users_set(
        name,
        tenants=list(tenants) or None,
        groups=[] if no_groups else (list(groups) or None),
        admin=admin,
    )
    if as_json:
        _emit_json(doc)
    else:
        _print_user(doc)
    return 0


@users.command("passwd")
@click.argument("name")
@click.option(
    "--password-stdin", is_flag=True, help="Read the new password from stdin's first line."
)
@json_option
@command
def users_passwd(name: str, password_stdin: bool, as_json: bool) -> int:
    """Set a user's password; the user's sessions end."""
    from agac.api import people

    doc = people.users_passwd(name, _password(password_stdin))
    if as_json:
        _emit_json(doc)
    else:
        click.echo(f"{name} has a new password; its sessions ended")
    return 0


@click.group()
def tokens() -> None:
    """API tokens for `agac serve` (Authorization: Bearer; administrators create them)."""


@tokens.command("create")
@click.argument("name")
@click.option(
    "--expires",
    metavar="D",
    default="90d",
    show_default=True,
    callback=_duration,
    help="How long the token works (30d, 12h).",
)
@json_option
@command
def tokens_create(name: str, expires: float, as_json: bool) -> int:
    """Create an API token for user NAME; it is printed once and never stored."""
    from agac.api import people

    doc = people.tokens_create(name, expires_in=expires)
    if as_json:
        _emit_json(doc)
        return 0
    click.echo(doc["token"])
    click.echo(
        f"token {doc['id']} for {name}, expires {_when(doc['expires_at'])}; it is shown "
        "this once: keep it as AGAC_TOKEN",
        err=True,
    )
    return 0


@tokens.command("list")
@click.argument("name", required=False)
@json_option
@command
def tokens_list(name: str | None, as_json: bool) -> int:
    """List tokens (of NAME, or everyone's): id, user, state, expiry, last use."""
    from agac.api import people

    rows = people.tokens_list(name)
    if as_json:
        _emit_json(rows)
        return 0
    for t in rows:
        click.echo(
            f"{t['id']}  {t['user']:<20} {t['state']:<8} expires {_when(t['expires_at'])}  "
            f"last used {_when(t['last_used_at'])}"
        )
    if not rows:
        click.echo("no tokens; create one with `agac tokens create NAME`")
    return 0


@tokens.command("revoke")
@click.argument("token_id", metavar="ID")
@json_option
@command
def tokens_revoke(token_id: str, as_json: bool) -> int:
    """Revoke a token (by its id, as `agac tokens list` shows it): refused from now on."""
    from agac.api import people

    doc = people.tokens_revoke(token_id)
    if as_json:
        _emit_json(doc)
    else:
        click.echo(f"token {doc['id']} of {doc['user']} is revoked")
    return 0
