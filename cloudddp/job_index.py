"""The jobs this user launched, on every provider: so `status`, `logs` and `cancel` find a job by its id or name
without `-p`, `latest` is the newest job anywhere, and `cloudddp list` shows them.

One SQLite file under the user's state folder (`$XDG_STATE_HOME/cloudddp/jobs.sqlite3`, default
`~/.local/state/cloudddp/`), private to its owner (folder 0700, file 0600); SQLite serialises concurrent
launches. The index is a convenience, never a condition: a launch whose job cannot be recorded says so and goes
on, and an unreadable index (or row) is skipped with a warning. An index written by an older cloudddp gets the
columns it lacks on first use (unknown, NULL, for the jobs already in it).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError
from cloudddp.providers.base import FINISHED_STATES

SCHEMA = """CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT NOT NULL, provider TEXT NOT NULL, name TEXT NOT NULL, submitted REAL NOT NULL,
    command TEXT NOT NULL DEFAULT '', state TEXT NOT NULL DEFAULT '', checked REAL NOT NULL DEFAULT 0,
    nodes INTEGER, finished REAL, metrics TEXT, run TEXT, request TEXT,
    PRIMARY KEY (provider, job_id))"""
# Columns added after the first release, with their types: an older index gets them (ALTER TABLE) when opened.
ADDED_COLUMNS = {"nodes": "INTEGER", "finished": "REAL", "metrics": "TEXT", "run": "TEXT", "request": "TEXT"}
# A job with `targets:` tries them in turn (cloudddp/failover.py): one row per attempt, written before it is
# submitted. `attempt` is its deterministic name (the spec and the target), so a rerun finds the attempt a killed
# client left open (`ended` NULL) and adopts its job instead of submitting another. Added with the table on first use.
ATTEMPTS = """CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT NOT NULL, attempt TEXT NOT NULL, position INTEGER NOT NULL,
    target TEXT NOT NULL, provider TEXT NOT NULL, job_id TEXT NOT NULL DEFAULT '', state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '', started REAL NOT NULL, ended REAL)"""


@dataclass(frozen=True)
class Entry:
    job_id: str
    provider: str
    name: str
    submitted: float  # seconds since the epoch
    command: str  # as launched, secrets masked
    state: str  # the last state seen ("" before any)
    checked: float  # when that state was seen
    nodes: int | None = None  # as launched; None where unknown (recorded before the index kept it)
    finished: float | None = None  # when a finished state was first seen; None while running, or unknown
    metrics: dict[str, str] | None = None  # the job spec's metric definitions (NAME -> REGEX); None: none given
    run: str | None = None  # the failover run it belongs to (its attempts: `attempts(run)`); None: no targets
    request: str | None = None  # what was sent, as its dry run prints it (secrets masked); None: not kept

    def __hash__(self) -> int:
        # A job is its row's key; the generated hash would hash `metrics`, a dict, and fail for any job that has them.
        return hash((self.provider, self.job_id))


@dataclass(frozen=True)
class Attempt:
    id: int
    run: str
    attempt: str  # deterministic: the same spec and target give the same name
    position: int  # the target's place in `targets:` (0 first)
    target: str
    provider: str
    job_id: str  # the name it is submitted under, known before submitting; the platform's id once submitted
    state: str  # "submitting", "submitted", "started", "moved on", "stopped", "done"
    reason: str
    started: float
    ended: float | None


def index_path() -> Path:
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "cloudddp" / "jobs.sqlite3"


def warn(what: str, exc: BaseException) -> None:
    print(f"cloudddp: {what} the job index {index_path()}: {exc}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def connection(create: bool) -> Iterator[sqlite3.Connection | None]:
    """The index, or None where there is none yet (and `create` is False)."""
    path = index_path()
    if not create and not path.exists():
        yield None
        return
    if create:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)  # before SQLite creates it with the umask's mode
    with contextlib.closing(sqlite3.connect(path, timeout=10)) as db, db:
        db.execute(SCHEMA)
        db.execute(ATTEMPTS)
        add_missing_columns(db)
        yield db


def add_missing_columns(db: sqlite3.Connection) -> None:
    """Bring an index an older cloudddp wrote up to SCHEMA's columns."""
    present = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
    for column, kind in ADDED_COLUMNS.items():
        if column in present:
            continue
        try:
            db.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")
        except sqlite3.OperationalError as exc:  # a concurrent cloudddp added it between our look and now
            if "duplicate column" not in str(exc):
                raise


def record(
    provider: str, job_id: str, name: str, command: str, nodes: int | None = None,
    metrics: dict[str, str] | None = None, run: str | None = None, request: str | None = None,
) -> None:  # fmt: skip
    try:
        with connection(create=True) as db:
            assert db is not None
            row = (job_id, provider, name, time.time(), command, nodes, json.dumps(metrics) if metrics else None, run)
            db.execute(
                "INSERT OR REPLACE INTO jobs (job_id, provider, name, submitted, command, nodes, metrics, run,"
                " request) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*row, request),
            )
    except (sqlite3.Error, OSError) as exc:
        warn("could not record the job in", exc)


def entries(provider: str | None = None, limit: int | None = None) -> list[Entry]:
    """Newest first; rows of the wrong shape are left out with a warning."""
    query = (
        "SELECT job_id, provider, name, submitted, command, state, checked, nodes, finished, metrics, run, request"
        " FROM jobs"
    )
    query += " WHERE provider = ?" if provider else ""
    query += " ORDER BY submitted DESC" + (f" LIMIT {int(limit)}" if limit else "")
    rows = read_rows(query, (provider,) if provider else ())
    found = []
    for row in rows:
        try:
            nodes, finished = number_or_none(row[7]), number_or_none(row[8])
            metrics = json.loads(row[9]) if row[9] else None
            if metrics is not None and not isinstance(metrics, dict):
                raise ValueError(f"metrics {row[9]!r} is not an object")
            found.append(Entry(str(row[0]), str(row[1]), str(row[2]), float(row[3]), str(row[4]), str(row[5]),
                               float(row[6]), None if nodes is None else int(nodes), finished, metrics,
                               None if row[10] is None else str(row[10]),
                               None if row[11] is None else str(row[11])))  # fmt: skip
        except (TypeError, ValueError) as exc:
            warn(f"skipped a damaged entry ({row[0]!r}) of", exc)
    return found


def number_or_none(value: object) -> float | None:
    """A nullable numeric column; text there (SQLite keeps what it is given) is a damaged row: ValueError."""
    if value is None:
        return None
    if isinstance(value, str | bytes):
        raise ValueError(f"{value!r} is not a number")
    return float(value)  # type: ignore[arg-type]


def remember_state(provider: str, job_id: str, state: str) -> None:
    """Cache the job's `state`. The first time a job is seen finished is kept as its end (its duration in `list`); a
    job running again (a requeued one) has none."""
    now, ended = time.time(), state in FINISHED_STATES
    try:
        with connection(create=False) as db:
            if db:
                db.execute("UPDATE jobs SET state = ?, checked = ?, finished = CASE WHEN ? THEN COALESCE(finished, ?)"
                           " END WHERE provider = ? AND job_id = ?",
                           (state, now, ended, now, provider, job_id))  # fmt: skip
    except (sqlite3.Error, OSError) as exc:
        warn("could not update", exc)


def find(job: str, provider: str | None = None) -> Entry | None:
    """The indexed job JOB names: "latest" (the newest), an id, else a unique name; None where none is indexed.
    A name several jobs share is an error listing them."""
    known = entries(provider)
    if job == "latest":
        return known[0] if known else None
    by_id = [entry for entry in known if entry.job_id == job]
    if by_id:
        return by_id[0]
    named = [entry for entry in known if entry.name == job]
    if len(named) > 1:
        listed = "\n".join(f"  {entry.job_id} ({entry.provider})" for entry in named)
        raise CloudDDPError(f"{len(named)} jobs are named {job!r}; give one of their ids:\n{listed}")
    return named[0] if named else None


ATTEMPT_COLUMNS = "id, run, attempt, position, target, provider, job_id, state, reason, started, ended"


def begin_attempt(run: str, attempt: str, position: int, target: str, provider: str, job_id: str) -> int:
    """Record an attempt before it is submitted; its row id. Unlike a job's record this is a condition: without it
    a client killed after submitting could not find its job again, and a rerun would submit a second."""
    try:
        with connection(create=True) as db:
            assert db is not None
            cursor = db.execute(
                "INSERT INTO attempts (run, attempt, position, target, provider, job_id, state, started)"
                " VALUES (?, ?, ?, ?, ?, ?, 'submitting', ?)",
                (run, attempt, position, target, provider, job_id, time.time()),
            )
            return int(cursor.lastrowid or 0)
    except (sqlite3.Error, OSError) as exc:
        raise CloudDDPError(
            f"could not record the attempt {attempt} in the job index {index_path()} before submitting it ({exc}); "
            "a job with targets needs it, so that a rerun never submits a second job. Check that the folder is "
            "writable (XDG_STATE_HOME)."
        ) from None


def update_attempt(attempt_id: int, *, state: str, job_id: str | None = None, reason: str | None = None,
                   ended: bool = False) -> None:  # fmt: skip
    """The attempt's new state (and job id, reason); `ended`: it is over, a rerun will not adopt it."""
    try:
        with connection(create=False) as db:
            if db:
                db.execute(
                    "UPDATE attempts SET state = ?, job_id = COALESCE(?, job_id), reason = COALESCE(?, reason),"
                    " ended = CASE WHEN ? THEN ? ELSE ended END WHERE id = ?",
                    (state, job_id, reason, ended, time.time(), attempt_id),
                )
    except (sqlite3.Error, OSError) as exc:
        warn("could not update an attempt in", exc)


def open_attempt(attempt: str) -> Attempt | None:
    """The attempt named `attempt` that has not ended (a client was killed while it was under way), else None."""
    found = read_attempts("WHERE attempt = ? AND ended IS NULL ORDER BY id DESC LIMIT 1", (attempt,))
    return found[0] if found else None


def attempts(run: str) -> list[Attempt]:
    """A failover run's attempts, first first."""
    return read_attempts("WHERE run = ? ORDER BY id", (run,))


def read_rows(query: str, parameters: tuple[object, ...]) -> list[Any]:
    """The query's rows; none (with a warning) where the index cannot be read, none where there is no index."""
    try:
        with connection(create=False) as db:
            return db.execute(query, parameters).fetchall() if db else []
    except (sqlite3.Error, OSError) as exc:
        warn("could not read", exc)
        return []


def read_attempts(where: str, parameters: tuple[object, ...]) -> list[Attempt]:
    rows = read_rows(f"SELECT {ATTEMPT_COLUMNS} FROM attempts {where}", parameters)
    found = []
    for row in rows:
        try:
            found.append(Attempt(int(row[0]), str(row[1]), str(row[2]), int(row[3]), str(row[4]), str(row[5]),
                                 str(row[6]), str(row[7]), str(row[8]), float(row[9]), number_or_none(row[10])))  # fmt: skip
        except (TypeError, ValueError) as exc:
            warn(f"skipped a damaged attempt ({row[2]!r}) of", exc)
    return found
