"""Issue 35 item 12, the service's login throttle: attempts are counted before the
password is checked, attempts in flight are bounded per name and per address, and a wrong
guesser's address never holds back another user's right password."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from argon2 import PasswordHasher
from service_support import PASSWORD, Service, running_service

from agac.api import identity
from agac.service.throttle import LoginThrottle
from agac.testing import ManualClock


class GatedHasher:
    """A cheap argon2 hasher whose ``verify`` waits on a gate the test opens: the checks
    admitted by the throttle stay in flight while every other attempt is answered."""

    def __init__(self) -> None:
        self.inner = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
        self.gate = threading.Event()
        self.changed = threading.Condition()
        self.checks = 0

    def hash(self, password: str) -> str:
        return str(self.inner.hash(password))

    def verify(self, stored: str, password: str) -> bool:
        with self.changed:
            self.checks += 1
            self.changed.notify_all()
        assert self.gate.wait(60), "the test never opened the gate"
        return bool(self.inner.verify(stored, password))


def test_i35_12_attempts_sent_at_once_are_not_all_checked(team: Path) -> None:
    gated = GatedHasher()
    with running_service(team, passwords=identity.Passwords(gated)) as service:
        browsers = [service.browser() for _ in range(12)]
        for b in browsers:
            b.get("/login")
        answered: list[int] = []

        def guess(b: Any) -> int:
            r = b.post("/login", {"username": "ann", "password": "wrong guess!"})
            status = int(r.status_code)
            if status == 429:
                assert "Too many sign-in attempts at once" in r.text
            with gated.changed:
                answered.append(status)
                gated.changed.notify_all()
            return status

        with ThreadPoolExecutor(12) as pool:
            futures = [pool.submit(guess, b) for b in browsers]
            with gated.changed:  # two checks held at the gate, the ten others answered
                assert gated.changed.wait_for(
                    lambda: gated.checks == 2 and len(answered) == 10, timeout=60
                ), (gated.checks, answered)
            gated.gate.set()
            statuses = Counter(f.result() for f in futures)
        assert statuses == {429: 10, 401: 2}
        assert gated.checks == 2  # the refused ten were never checked
        # the throttle has nothing in flight left: the next attempt is admitted and checked
        assert browsers[0].sign_in("ann").status_code == 303
        assert gated.checks == 3


def test_i35_12_attempts_are_counted_before_they_are_checked() -> None:
    clock = ManualClock()
    throttle = LoginThrottle(clock=clock.time, per_name=20, per_address=20)
    attempts = [throttle.begin("ann", "10.0.0.1") for _ in range(8)]  # all in flight at once
    assert [a.before for a in attempts if a is not None] == [0, 0, 0, 0, 0, 1, 2, 4]
    for a in attempts:
        assert a is not None
        throttle.end(a, ok=False)
    later = throttle.begin("ann", "10.0.0.2")
    assert later is not None and later.before == 8.0
    throttle.end(later, ok=True)  # a right password clears the name's count
    again = throttle.begin("ann", "10.0.0.2")
    assert again is not None and again.before == 0.0
    throttle.end(again, ok=True)
    clock.advance(901.0)  # the window passes: the address's failures are forgotten
    fresh = throttle.begin("bob", "10.0.0.1")
    assert fresh is not None and fresh.address_wait == 0.0


def test_i35_12_a_bound_on_attempts_in_flight_per_name_and_address() -> None:
    throttle = LoginThrottle(clock=ManualClock().time, per_name=2, per_address=3)
    first, second = throttle.begin("ann", "a"), throttle.begin("ANN", "b")
    assert first is not None and second is not None
    assert throttle.begin("ann", "c") is None  # a third on the name, refused unchecked
    third = throttle.begin("bob", "a")
    assert third is not None
    fourth = throttle.begin("eve", "a")
    assert fourth is not None
    assert throttle.begin("carl", "a") is None  # a fourth from the address
    throttle.end(first, ok=False)
    assert throttle.begin("ann", "c") is not None  # a place on the name is free again


def test_i35_12_a_guessers_address_does_not_hold_back_another_users_password(
    service: Service,
) -> None:
    guesser = service.browser()
    guesser.get("/login")
    for _ in range(12):
        r = guesser.post("/login", {"username": "ann", "password": "wrong guess!"})
        assert r.status_code == 401
    assert service.sleeps == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    # bob, from the same address, with his right password: in at once, no wait
    bob = service.browser()
    assert bob.sign_in("bob").status_code == 303
    assert service.sleeps == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    # a wrong password from that address still waits the address's delay before its answer
    eve = service.browser()
    eve.get("/login")
    assert eve.post("/login", {"username": "eve", "password": "wrong too!"}).status_code == 401
    assert service.sleeps[-1] == 30.0 and len(service.sleeps) == 8
    # ann's own name stays slowed, right password or not
    assert service.browser().sign_in("ann", PASSWORD).status_code == 303
    assert service.sleeps[-1] == 30.0 and len(service.sleeps) == 9
