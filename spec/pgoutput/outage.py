"""When a change source waits for what is away, and when it stops waiting (sans-IO).

A source that exits when the sync server or Postgres is away for a while turns a short outage
into a stopped pipeline that someone must restart; meanwhile the slot keeps every WAL segment
since its confirmed position. So the source waits for as long as it takes, retrying with capped
backoff, and says so: a warning line every ``warn_every_s`` naming what it waits for, for how
long, and how much WAL the slot retains. The one reason to stop is the database's disk: with
``max_retained_wal``, a slot retaining more stops the source with one line (dropping or advancing
the slot is then the operator's choice, not the source's).

What counts as "away" for Postgres (:func:`postgres_transient`) is by SQLSTATE: a lost or refused
connection, a server shutting down or starting up, too many connections, the slot still held by
the walsender of the connection just lost. Anything else (a dropped slot or publication, a
wrong password the server reports on a session) is a mistake that waiting cannot fix. A
connection libpq could not open has no SQLSTATE (libpq gives none for it), so it is away,
whatever libpq's reason: its line goes into the warning.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from spec.clock import after

TRANSIENT_SQLSTATE_CLASSES = ("08", "53")
"""Connection exceptions, insufficient resources (too many connections, out of memory or disk)."""
TRANSIENT_SQLSTATES = frozenset({
    "57P01",  # admin_shutdown: the server is stopping (or the backend was terminated)
    "57P02",  # crash_shutdown
    "57P03",  # cannot_connect_now: starting up, in recovery
    "55006",  # object_in_use: the slot is still active for the walsender of a lost connection
})


def postgres_transient(sqlstate: str | None) -> bool:
    """True for a failure that waiting can cure: no SQLSTATE (the connection failed or was refused),
    or one of a server that is away, starting, stopping or busy."""
    return sqlstate is None or sqlstate[:2] in TRANSIENT_SQLSTATE_CLASSES or sqlstate in TRANSIENT_SQLSTATES


class Away(enum.Enum):
    """What the source waits for."""

    SYNC_SERVER = "the sync server"
    POSTGRES = "Postgres"


@dataclass(frozen=True, slots=True)
class OutageStep:
    """What to do after a failed attempt: wait ``retry_in_s`` and try again, printing ``warning``
    first if there is one; or, when ``stop`` is set, stop with that line."""

    retry_in_s: float
    warning: str | None = None
    stop: str | None = None


def format_bytes(count: int) -> str:
    """A size for a person: ``512 B``, ``3.2 MiB``, ``1.5 GiB``."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def parse_bytes(text: str) -> int:
    """``--max-retained-wal``'s value: bytes, or a number with kB, MB, GB, TB (powers of 1024, as Postgres counts)."""
    units = {"TB": 1 << 40, "GB": 1 << 30, "MB": 1 << 20, "KB": 1 << 10, "B": 1}
    upper = text.strip().upper().replace("IB", "B")
    for suffix, factor in units.items():
        if upper.endswith(suffix):
            number = upper[:-len(suffix)].strip()
            break
    else:
        number, factor = upper, 1
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (say 20GB, 512MB or a number of bytes)") from None
    if not 0 < value < math.inf:  # written so that NaN is refused too
        raise ValueError(f"not a positive size: {text!r}")
    return int(value * factor)


@dataclass
class OutagePolicy:
    """One source's waiting: fed the time and each failed attempt, it says when to retry, when to
    warn and when to stop; ``recovered`` ends an outage."""

    slot: str
    warn_every_s: float = 30.0
    max_retained_wal: int | None = None
    backoff_initial_s: float = 0.1
    backoff_max_s: float = 5.0
    attempt_s: float = 5.0
    """How long one attempt to reach the sync server retries (the sync client's deadline) before this decides."""
    away: Away | None = None
    since: float = 0.0
    warned_at: float = 0.0
    backoff_s: float = 0.0

    def failed(self, now: float, away: Away, where: str, reason: str, retained_wal: int | None) -> OutageStep:
        """An attempt to reach ``away`` (at ``where``) failed with ``reason``; ``retained_wal`` is what the
        slot retains now (None: unknown, Postgres being away)."""
        if self.away is not away:
            self.away, self.since, self.warned_at, self.backoff_s = away, now, now, self.backoff_initial_s
        else:
            self.backoff_s = min(self.backoff_s * 2, self.backoff_max_s)
        stop = self.over_limit(retained_wal)
        if stop is not None:
            return OutageStep(0.0, stop=f"{stop} while waiting for {away.value} at {where}")
        warning = None
        if now >= after(self.warned_at, self.warn_every_s):
            self.warned_at = now
            retained = (f"what slot {self.slot} retains is unknown while Postgres is away" if retained_wal is None
                        else f"slot {self.slot} retains {format_bytes(retained_wal)} of WAL")
            warning = f"waiting for {away.value} at {where} for {now - self.since:.0f} s ({reason}); {retained}"
        return OutageStep(self.backoff_s, warning=warning)

    def over_limit(self, retained_wal: int | None) -> str | None:
        """The line to stop with when the slot retains more than ``max_retained_wal`` (else None)."""
        if self.max_retained_wal is None or retained_wal is None or retained_wal <= self.max_retained_wal:
            return None
        return (f"slot {self.slot} retains {format_bytes(retained_wal)} of WAL, more than --max-retained-wal "
                f"{format_bytes(self.max_retained_wal)}: stopping before the database's disk fills (the slot keeps "
                "its position; restart the source once the sync server is back, or drop the slot and resync)")

    def recovered(self, now: float) -> str | None:
        """An attempt succeeded: the line saying an outage ended, if it did."""
        away, self.away = self.away, None
        return None if away is None else f"{away.value} is back after {now - self.since:.0f} s"
