"""Helpers of the service tests: a team project, `agac serve`'s app on a real loopback port
(uvicorn in a thread), and a browser-like HTTP client that signs in through the form.

People of the team project (docs/guarantees.md, Teams):

- ann: tenant ``default``, group ``leads`` (an approver of the workflow's ``send``);
- bob: tenant ``default``, no group (sees the runs, may not decide);
- eve: tenant ``other``, group ``leads`` (an approver elsewhere: sees none of ``default``).
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from argon2 import PasswordHasher

from agac.api import identity
from agac.config.project import find_project, store_url
from agac.service.app import create_app
from agac.service.context import Exposure, ServiceContext, loopback_hosts
from agac.service.throttle import LoginThrottle
from agac.store.repository import Store
from agac.testing import write_project

PASSWORD = "correct horse battery"
CHEAP = identity.Passwords(PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))
"""Argon2 with small parameters: the tests sign in often; the code path is the same."""

WORKFLOW = """\
name: replies
input: {path: data/, id_field: id}
defaults: {model: mock/m}
actions:
  - name: draft
    prompt: "Draft a reply to: {{ source.text }}"
  - name: send
    kind: tool
    dependencies: [draft]
    function: tools.mail:send
    effect: {idempotent: true}
    approval: {approvers: [leads], expires_in: 24h}
"""

TOOLS = """\
def send(inputs, ctx):
    return {"sent": inputs["source"]["id"]}
"""

USERS = {"ann": (["default"], ["leads"]), "bob": (["default"], []), "eve": (["other"], ["leads"])}


class Clock:
    """A clock tests move by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def team_project(
    root: Path,
    *,
    rows: list[dict[str, Any]] | None = None,
    workflow: str = WORKFLOW,
    agac_yml: str = "identity: login\n",
) -> Path:
    """A project with ``identity: login``, the ``replies`` workflow and ann, bob and eve."""
    write_project(
        root,
        workflow,
        workflow_file="workflows/replies.yml",
        agac_yml=agac_yml,
        data={
            "data/a.jsonl": rows
            or [{"id": "c1", "text": "late parcel"}, {"id": "c2", "text": "wrong size"}]
        },
        files={"tools/__init__.py": "", "tools/mail.py": TOOLS},
    )
    store = Store(store_url(find_project(root)))
    try:
        for name, (tenants, groups) in USERS.items():
            identity.add_user(
                store, name, PASSWORD, tenants=tenants, groups=groups, passwords=CHEAP
            )
    finally:
        store.close()
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Service:
    url: str
    ctx: ServiceContext
    clock: Clock
    sleeps: list[float] = field(default_factory=list)
    clients: list[httpx.Client] = field(default_factory=list)
    """Every client made, closed when the service stops."""

    @property
    def store(self) -> Store:
        return self.ctx.store

    @property
    def host(self) -> str:
        return self.url.split("://", 1)[1]

    def client(self, **kw: Any) -> httpx.Client:
        made = httpx.Client(base_url=self.url, follow_redirects=False, timeout=30, **kw)
        self.clients.append(made)
        return made

    def browser(self, name: str | None = None) -> Browser:
        b = Browser(self.client(), self.url)
        if name is not None:
            b.sign_in(name)
        return b

    def api(self, name: str) -> httpx.Client:
        token = identity.create_token(self.store, name, clock=self.clock)["token"]
        return self.client(headers={"Authorization": f"Bearer {token}"})


@contextmanager
def running_service(
    root: Path, *, poll_seconds: float = 0.05, passwords: identity.Passwords = CHEAP
) -> Iterator[Service]:
    """``agac serve``'s app for the project at ``root``, on a free loopback port."""
    project = find_project(root)
    store = Store(store_url(project))
    clock = Clock()
    port = free_port()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)  # the throttle's waits are recorded, not slept

    ctx = ServiceContext(
        project=project,
        store=store,
        exposure=Exposure(loopback_hosts(port)),
        clock=clock,
        sleep=sleep,
        passwords=passwords,
        throttle=LoginThrottle(clock=clock),
        poll_seconds=poll_seconds,
    )
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(ctx),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the service did not start"
        time.sleep(0.02)
    svc = Service(f"http://127.0.0.1:{port}", ctx, clock, sleeps)
    try:
        yield svc
    finally:
        for made in svc.clients:
            made.close()
        server.should_exit = True
        thread.join(15)
        store.close()


CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


class Browser:
    """What a browser does on the pages: cookies, the Origin header on posts, form tokens."""

    def __init__(self, client: httpx.Client, origin: str) -> None:
        self.http = client
        self.origin = origin
        self.csrf = ""

    def get(self, path: str, **kw: Any) -> httpx.Response:
        response = self.http.get(path, **kw)
        found = (
            CSRF.search(response.text)
            if response.headers.get("content-type", "").startswith("text/html")
            else None
        )
        if found:
            self.csrf = found.group(1)
        return response

    def post(
        self, path: str, data: dict[str, str], *, origin: str | None = "same", csrf: bool = True
    ) -> httpx.Response:
        headers = {}
        if origin is not None:
            headers["Origin"] = self.origin if origin == "same" else origin
        body = dict(data)
        if csrf:
            body.setdefault("csrf_token", self.csrf)
        return self.http.post(path, data=body, headers=headers)

    def sign_in(self, name: str, password: str = PASSWORD) -> httpx.Response:
        self.get("/login")
        response = self.post("/login", {"username": name, "password": password})
        if response.status_code == 303:
            self.get("/runs")  # the page carries the session's CSRF token
        return response
