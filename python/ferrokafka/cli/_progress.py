"""Progress on stderr: a bar redrawn in place (plain ANSI) when stderr is a terminal,
a plain line per interval when it is piped or captured, so logs stay readable.
No dependency: ``\\r`` and ``ESC[K`` (erase to end of line) are all it uses.
"""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

_ERASE = "\r\x1b[K"


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} GB"  # pragma: no cover - the loop always returns


class Progress:
    """``Progress("produce", total=None)``; ``update(records, nbytes)`` with the
    running totals, ``close()`` once (erases the bar). Redraws at most 10 times a
    second on a terminal; on a pipe writes a line every ``interval`` seconds, and
    nothing for work shorter than that."""

    def __init__(self, label: str, total: Optional[int] = None, stream: Optional[TextIO] = None,
                 interval: float = 1.0, enabled: bool = True, total_input: Optional[int] = None) -> None:
        self.label = label
        self.total = total
        # Bytes of input to read (files of known size): the bar's measure when
        # the number of records is not known in advance.
        self.total_input = total_input
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.interval = 0.1 if self.tty else interval
        self.start = time.monotonic()
        self._next = self.start + self.interval
        self._drawn = False

    def update(self, records: int, nbytes: int = 0, force: bool = False, input_done: int = 0) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now < self._next:
            return
        self._next = now + self.interval
        secs = max(now - self.start, 1e-9)
        rate = f"{records / secs:,.0f} rec/s, {human_bytes(nbytes / secs)}/s"
        if self.tty:
            self.stream.write(_ERASE + self._bar(records, input_done) + f" {rate}")
            self._drawn = True
        else:
            done = f"{records:,}" + (f"/{self.total:,}" if self.total else "")
            self.stream.write(f"{self.label}: {done} records, {secs:,.1f} s, {rate}\n")
        self.stream.flush()

    def message(self, line: str) -> None:
        """A line of its own (always shown, even when the bar is off), above the bar."""
        if self._drawn:
            self.stream.write(_ERASE)
            self._drawn = False
        self.stream.write(line + "\n")
        self.stream.flush()
        # the bar comes back at the next update

    def _bar(self, records: int, input_done: int = 0) -> str:
        if self.total:
            frac = min(1.0, records / self.total)
            count = f"{records:,}/{self.total:,}"
        elif self.total_input:
            frac = min(1.0, input_done / self.total_input)
            count = f"{records:,} records"
        else:
            return f"{self.label}: {records:,} records"
        width = 30
        full = int(frac * width)
        return f"{self.label} [{'#' * full}{'.' * (width - full)}] {frac * 100:5.1f}% {count}"

    def close(self) -> None:
        if self._drawn:
            self.stream.write(_ERASE)
            self.stream.flush()
            self._drawn = False
