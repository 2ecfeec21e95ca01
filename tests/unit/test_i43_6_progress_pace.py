"""The newcomer's path: the progress line shows the rate this process settles units at
and when it will be done (the times are given, not measured)."""

from __future__ import annotations

from agac.api.progress import Pace, progress_line
from agac.engine.outcomes.writer import Progress


def test_i43_6_the_progress_line_shows_rate_and_eta() -> None:
    progress = Progress(["classify", "reply"], total=100)
    for _ in range(10):
        progress.bump("classify", "answered")  # done before this process looked
    pace = Pace(progress, started=1000.0)
    assert pace.text(progress, 1000.0) == ""  # nothing settled here yet: no pace shown
    assert progress_line(progress, pace.text(progress, 1000.0)).endswith("$0.0000")
    for _ in range(40):
        progress.bump("classify", "answered")
    for _ in range(20):
        progress.bump("reply", "failed")
    # 60 units in 20 s: 3.0 units/s; 200 - 70 = 130 units left: 43 s.
    line = progress_line(progress, pace.text(progress, 1020.0))
    assert line.endswith("· 3.0 units/s, ETA 43s"), line
    assert line.startswith("classify 50/100 · reply 20/100 (20 failed) · $0.0000")
    slow = Pace(progress, started=0.0)
    for _ in range(30):
        progress.bump("reply", "answered")
    # 30 units in 3600 s: 0.5 units/min; 100 left: 3h20m.
    assert slow.text(progress, 3600.0) == "0.5 units/min, ETA 3h20m"
