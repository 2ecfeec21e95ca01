"""T0, T1 through the CLI: ``agac users …`` and ``agac tokens …`` are administrator commands
that write the store; A3 with ``identity: login`` refuses ``--as`` and ``AGAC_USER``."""

from __future__ import annotations

from pathlib import Path

from cli_support import agac

from agac.testing import write_project

PASSWORD = "correct horse battery\n"


def _project(root: Path, identity: str = "login") -> Path:
    write_project(
        root,
        "name: wf\ninput: {path: data/}\nactions:\n  - {name: a, model: mock/m, prompt: hi}\n",
        agac_yml=f"identity: {identity}\n",
        data={"data/a.jsonl": [{"x": 1}]},
    )
    return root


def test_t1_users_add_list_set_disable_enable_passwd(tmp_path: Path) -> None:
    root = _project(tmp_path)
    added = agac(
        "users",
        "add",
        "ann",
        "--tenant",
        "default",
        "--tenant",
        "acme",
        "--group",
        "leads",
        "--admin",
        "--password-stdin",
        "--json",
        cwd=root,
        stdin=PASSWORD,
    )
    assert added.code == 0, added
    assert added.json() == {
        **added.json(),
        "name": "ann",
        "tenants": ["acme", "default"],
        "groups": ["leads"],
        "admin": True,
        "active": True,
    }
    assert "correct horse" not in added.out and "argon2" not in added.out
    again = agac(
        "users", "add", "ann", "--tenant", "default", "--password-stdin", cwd=root, stdin=PASSWORD
    )
    assert again.code == 2 and "already a user 'ann'" in again.err
    short = agac(
        "users", "add", "bob", "--tenant", "default", "--password-stdin", cwd=root, stdin="short\n"
    )
    assert short.code == 2 and "at least 10 characters" in short.err
    no_stdin = agac("users", "add", "bob", "--tenant", "default", cwd=root)
    assert no_stdin.code == 2 and "--password-stdin" in no_stdin.err
    bad = agac(
        "users", "add", "b<o>b", "--tenant", "default", "--password-stdin", cwd=root, stdin=PASSWORD
    )
    assert bad.code == 2 and "not valid" in bad.err
    no_tenant = agac("users", "add", "bob", "--password-stdin", cwd=root, stdin=PASSWORD)
    assert no_tenant.code == 2 and "--tenant" in no_tenant.err
    changed = agac("users", "set", "ann", "--no-groups", "--no-admin", "--json", cwd=root)
    assert changed.code == 0 and changed.json()["groups"] == [] and not changed.json()["admin"]
    assert agac("users", "disable", "ann", cwd=root).code == 0
    listed = agac("users", "list", "--json", cwd=root).json()
    assert [(u["name"], u["active"]) for u in listed] == [("ann", False)]
    assert "DISABLED" in agac("users", "list", cwd=root).out
    assert agac("users", "enable", "ann", cwd=root).code == 0
    assert (
        agac(
            "users", "passwd", "ann", "--password-stdin", cwd=root, stdin="another long one\n"
        ).code
        == 0
    )
    missing = agac("users", "disable", "zed", cwd=root)
    assert missing.code == 2 and "no user 'zed'" in missing.err


def test_t0_whoever_holds_the_store_administers_it(tmp_path: Path) -> None:
    """T0: ``agac users`` writes the store it is given, with no sign-in and no service: holding
    the store is what makes an administrator, and another store is not touched."""
    root = _project(tmp_path / "p")
    other = f"sqlite:///{tmp_path / 'other.db'}"
    added = agac(
        "users",
        "add",
        "ann",
        "--tenant",
        "default",
        "--password-stdin",
        cwd=root,
        stdin=PASSWORD,
        env={"AGAC_STORE": other},
    )
    assert added.code == 0, added
    there = agac("users", "list", "--json", cwd=root, env={"AGAC_STORE": other}).json()
    here = agac("users", "list", "--json", cwd=root).json()
    assert [u["name"] for u in there] == ["ann"] and here == []


def test_t1_tokens_are_printed_once_and_stored_hashed(tmp_path: Path) -> None:
    root = _project(tmp_path)
    assert (
        agac(
            "users",
            "add",
            "ann",
            "--tenant",
            "default",
            "--password-stdin",
            cwd=root,
            stdin=PASSWORD,
        ).code
        == 0
    )
    made = agac("tokens", "create", "ann", "--expires", "30d", cwd=root)
    assert made.code == 0, made
    token = made.out.strip()
    assert token.startswith("agac_") and "shown this once" in made.err
    listed = agac("tokens", "list", "--json", cwd=root).json()
    assert len(listed) == 1 and listed[0]["state"] == "valid" and "token" not in listed[0]
    assert token not in (root / ".agac" / "agac.db").read_bytes().decode("latin-1")
    secret = token.split("_", 2)[2]  # agac_<id>_<secret>; the secret may hold "_" itself
    assert len(secret) == 43 and secret not in agac("tokens", "list", cwd=root).out
    revoked = agac("tokens", "revoke", listed[0]["id"], "--json", cwd=root)
    assert revoked.code == 0 and revoked.json()["state"] == "revoked"
    assert agac("tokens", "create", "zed", cwd=root).code == 2
    assert agac("tokens", "create", "ann", "--expires", "soon", cwd=root).code == 2


def test_a3_identity_login_refuses_as_and_agac_user_naming_both(tmp_path: Path) -> None:
    root = _project(tmp_path)
    by_flag = agac("approve", "abc123", "--as", "ann", cwd=root)
    assert by_flag.code == 2 and "--as" in by_flag.err and "AGAC_USER" in by_flag.err, by_flag
    by_env = agac("reject", "abc123", "--reason", "no", cwd=root, env={"AGAC_USER": "ann"})
    assert by_env.code == 2 and "--as" in by_env.err and "AGAC_USER" in by_env.err
    no_server = agac("revise", "abc123", "--set", "a=1", cwd=root)
    assert no_server.code == 2 and "AGAC_SERVER" in no_server.err and "AGAC_TOKEN" in no_server.err
    down = agac(
        "approve",
        "abc123",
        cwd=root,
        env={"AGAC_SERVER": "http://127.0.0.1:9", "AGAC_TOKEN": "agac_x"},
    )
    assert down.code == 1 and "cannot reach the service" in down.err


def test_t4_serve_refuses_to_start_without_identity_login(tmp_path: Path) -> None:
    # Without identity: login, only one person on loopback (test_i43_3_serve_for_one_person).
    root = _project(tmp_path, identity="local")
    refused = agac(
        "serve", "--host", "0.0.0.0", "--allow-remote", "--behind-proxy", "10.0.0.1",
        "--public-host", "agac.example", cwd=root,
    )  # fmt: skip
    assert refused.code == 2 and "identity: login" in refused.err
    remote = agac("serve", "--host", "0.0.0.0", cwd=_project(tmp_path / "b"))
    assert remote.code == 2 and "--allow-remote" in remote.err


def test_groups_in_agac_yml_are_refused_with_identity_login(tmp_path: Path) -> None:
    write_project(
        tmp_path, "name: wf\nactions: []\n", agac_yml="identity: login\ngroups:\n  leads: [ann]\n"
    )
    r = agac("users", "list", cwd=tmp_path)
    assert r.code == 2 and "groups_with_login" in r.err and "agac.yml" in r.err
    write_project(tmp_path / "b", "name: wf\nactions: []\n", agac_yml="identity: sso\n")
    r = agac("users", "list", cwd=tmp_path / "b")
    assert r.code == 2 and "invalid_identity" in r.err
