"""The dashboard's HTTP server: the standard library's threading server, a JSON API and the files in static/.

Who may use it, as Jupyter decides (jupyter_server/auth/identity.py, token auth): a random token in the URL
printed on the terminal (never logged); the first page load with `?token=` sets it as an HttpOnly, SameSite
cookie, and every other request must carry that cookie or the `X-Cloudddp-Token` header. Against DNS
rebinding the Host header must name this server (127.0.0.1, localhost or the `--host` given), and a request
with an Origin must come from this server's own; actions are POSTs carrying the header, which a form on another
site cannot set. Files are served from a fixed list, never from a path taken from the URL.

Routes: `GET /` the page; `GET /static/NAME`; `GET /api/jobs`; `GET /api/job?provider=P&id=J` (state per node,
timeline, metrics, the request as its dry run printed it); `GET /api/logs?provider=P&id=J`, each node's log tail as
server-sent events (log_stream.py); `POST /api/cancel` with `{"provider": P, "id": J}`.
"""

from __future__ import annotations

import collections
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cloudddp import job_index, job_list
from cloudddp.metrics import DEFAULT_METRICS, extract
from cloudddp.providers import get_provider, registry
from cloudddp.providers.base import FINISHED_STATES, Provider
from cloudddp.redact import redact_text
from cloudddp.ui.log_stream import PERIOD, Followers

COOKIE, HEADER = "cloudddp_token", "X-Cloudddp-Token"
STATIC = {  # name -> content type: nothing else under static/ is served
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "uPlot.iife.min.js": "text/javascript; charset=utf-8",
    "uPlot.min.css": "text/css; charset=utf-8",
}
FIRST_READ = 2.0  # seconds a job page waits for a follower just started to read the log there is
SETTLED = 0.3  # seconds without a new line after which a follower has read what there is
KEEPALIVE = 15.0  # seconds between two messages of a quiet log stream (a page gone is noticed by then)
STATE_DEADLINE = 2.0  # seconds a background refresh of the jobs' states gives the providers (job_list.refresh)
LOCAL_LIMIT = 4 * 1024 * 1024  # a local run's logs read for its jobs-page metrics, per refresh


class Dashboard(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, token: str | None = None) -> None:
        super().__init__((host, port), Handler)
        self.token = token or secrets.token_urlsafe(32)
        self.hosts = {f"{name}:{self.server_port}" for name in {host, "127.0.0.1", "localhost"}}
        self.origins = {f"http://{name}" for name in self.hosts}
        self.followers = Followers()
        self.states = States()
        registry.providers()  # found once, before the first page asks (0.4 s of imports here)

    @property
    def url(self) -> str:
        return f"http://{self.server_address[0]}:{self.server_port}/?token={self.token}"


class Handler(BaseHTTPRequestHandler):
    server: Dashboard
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing logged: a request line holds the token."""

    # -- checks ----------------------------------------------------------------------------------------------------
    def allowed(self, query: dict[str, list[str]]) -> bool:
        if self.headers.get("Host") not in self.server.hosts:
            return False  # DNS rebinding: a page of evil.example resolved to 127.0.0.1
        origin = self.headers.get("Origin")
        if origin is not None and origin not in self.server.origins:
            return False
        cookie = SimpleCookie(self.headers.get("Cookie") or "")
        given = [self.headers.get(HEADER), cookie[COOKIE].value if COOKIE in cookie else None, *query.get("token", [])]
        return any(value is not None and hmac.compare_digest(value, self.server.token) for value in given)

    # -- answers ---------------------------------------------------------------------------------------------------
    def send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        headers = {"Content-Type": content_type, "Content-Length": str(len(body)), "Cache-Control": "no-store",
                   "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                   "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; connect-src 'self'",
                   **(extra or {})}  # fmt: skip
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, value: Any, status: int = HTTPStatus.OK) -> None:
        self.send(status, json.dumps(value).encode(), "application/json")

    def refuse(self) -> None:
        self.send(HTTPStatus.FORBIDDEN, b"forbidden: open the URL cloudddp ui printed\n", "text/plain; charset=utf-8")

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        if not self.allowed(query):
            return self.refuse()
        routes: dict[str, Callable[[], None]] = {
            "/": lambda: self.static("index.html", set_cookie=True),
            "/api/jobs": lambda: self.send_json(jobs_page(self.server.states, self.server.followers)),
            "/api/job": lambda: self.send_json(
                job_page(self.server.followers, first(query, "provider"), first(query, "id"))
            ),
            "/api/logs": lambda: self.stream_logs(first(query, "provider"), first(query, "id")),
        }
        if parts.path in routes:
            return routes[parts.path]()
        name = parts.path.removeprefix("/static/")
        if parts.path.startswith("/static/") and name in STATIC:
            return self.static(name)
        self.send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 4096))
        if not self.allowed({}) or self.headers.get(HEADER) is None:  # an action needs the header, not the cookie
            return self.refuse()
        if urlsplit(self.path).path != "/api/cancel":
            return self.send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")
        try:
            asked = json.loads(body or b"{}")
            provider, job = str(asked["provider"]), str(asked["id"])
            get_provider(provider).cancel(job)
        except Exception as exc:  # the page shows what went wrong; the server goes on
            return self.send_json({"error": str(exc)}, HTTPStatus.BAD_REQUEST)
        self.send_json({"asked": job})

    def stream_logs(self, provider: str, job: str) -> None:
        """Server-sent events: `{"lines": {node: [...]}, "skipped": {node: n}, "reset": true}` first (the kept
        tail), then what is new every PERIOD; `event: end` when the job's log has ended."""
        try:
            chosen, job_id, entry = locate(provider, job)
        except Exception as exc:
            return self.send_json({"error": str(exc)}, HTTPStatus.NOT_FOUND)
        definitions = (entry.metrics if entry else None) or DEFAULT_METRICS
        follower = self.server.followers.watch(
            (chosen.name, job_id), lambda: chosen.logs(job_id, follow=True), definitions
        )
        self.close_connection = True
        try:
            self.send_response(HTTPStatus.OK)
            for name, value in {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store",
                                "Connection": "close", "X-Content-Type-Options": "nosniff"}.items():  # fmt: skip
                self.send_header(name, value)
            self.end_headers()
            seen: dict[str, int] = {}
            reset, quiet_since = True, time.monotonic()
            while True:
                ended = follower.ended  # before the lines: none written before the end is missed
                lines, skipped = follower.since(seen)
                if lines or reset:
                    message = {"lines": lines, "skipped": skipped, "reset": reset}
                    self.wfile.write(f"data: {json.dumps(message)}\n\n".encode())
                    reset, quiet_since = False, time.monotonic()
                elif time.monotonic() - quiet_since > KEEPALIVE:
                    self.wfile.write(b": still here\n\n")  # a page that left makes this write fail
                    quiet_since = time.monotonic()
                if ended:
                    self.wfile.write(f"event: end\ndata: {json.dumps({'error': follower.error})}\n\n".encode())
                    return
                self.wfile.flush()
                time.sleep(PERIOD)
        except (BrokenPipeError, ConnectionResetError):
            return  # the page went away
        finally:
            self.server.followers.leave(follower)

    def static(self, name: str, set_cookie: bool = False) -> None:
        body = files("cloudddp.ui").joinpath("static").joinpath(name).read_bytes()
        cookie = (
            {"Set-Cookie": f"{COOKIE}={self.server.token}; HttpOnly; SameSite=Strict; Path=/"} if set_cookie else {}
        )
        self.send(HTTPStatus.OK, body, STATIC[name], cookie)


def first(query: dict[str, list[str]], name: str) -> str:
    return (query.get(name) or [""])[0]


# -- what the pages show ---------------------------------------------------------------------------------------------
class States:
    """The jobs' states now. Runs on this machine are asked at once (a file read); every other provider in the
    background (job_list.refresh, under STATE_DEADLINE), so the jobs page never waits on a provider that does not
    answer: a request starts a refresh unless one is in flight, and shows each job's state as last answered, or as
    last seen (`cloudddp list`'s "unknown (cached ...)") until its provider answers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.answered: dict[tuple[str, str], str] = {}  # (provider, job id) -> state
        self.asking = False

    def latest(self, entries: list[job_index.Entry]) -> dict[job_index.Entry, str]:
        here = [entry for entry in entries if local(entry.provider)]
        elsewhere = [entry for entry in entries if not local(entry.provider)]
        with self.lock:
            start, self.asking = not self.asking and bool(elsewhere), self.asking or bool(elsewhere)
        if start:
            threading.Thread(target=self.refresh, args=(elsewhere,), name="cloudddp-ui-states", daemon=True).start()
        answered = job_list.refresh(here, STATE_DEADLINE)
        with self.lock:
            answered.update({entry: self.answered[key] for entry in elsewhere
                             if (key := (entry.provider, entry.job_id)) in self.answered})  # fmt: skip
        return answered

    def refresh(self, entries: list[job_index.Entry]) -> None:
        try:
            answered = job_list.refresh(entries, STATE_DEADLINE)
            with self.lock:
                self.answered.update({(entry.provider, entry.job_id): state for entry, state in answered.items()})
        finally:
            with self.lock:
                self.asking = False


def local(provider: str) -> bool:
    """True for a provider whose jobs run on this machine (their state and logs are files here)."""
    try:
        return registry.get(provider).runs_on_this_machine
    except Exception:  # a provider this cloudddp does not know: asked in the background, where it fails quietly
        return False


def jobs_page(states: States, followers: Followers) -> dict[str, Any]:
    """Every indexed job with its state (as last answered, see States) and, for runs on this machine, the last
    value of each metric: from its follower where a page reads its log (log_stream.py), else from its log."""
    entries = job_index.entries()
    answered = states.latest(entries)
    now = time.time()
    rows = []
    for entry in entries:
        found = followers.last_values((entry.provider, entry.job_id))
        rows.append({
            "provider": entry.provider, "id": entry.job_id, "name": entry.name, "nodes": entry.nodes,
            "state": job_list.shown_state(entry, answered, now), "submitted": entry.submitted,
            "duration": job_list.duration(entry, answered, now),
            "metrics": last_values(entry) if found is None else found,
        })  # fmt: skip
    return {"jobs": rows, "now": now}


# A finished run's last metric values, which no longer change: (provider, job id) -> values.
FINISHED_VALUES: dict[tuple[str, str], dict[str, float]] = {}


def last_values(entry: job_index.Entry) -> dict[str, float]:
    """The last value of each metric of a run on this machine (reading its logs is cheap there); {} elsewhere.
    Read once for a run known to have finished."""
    key = (entry.provider, entry.job_id)
    if key in FINISHED_VALUES:
        return FINISHED_VALUES[key]
    if not local(entry.provider):
        return {}
    try:
        lines = bounded(get_provider(entry.provider).logs(entry.job_id), LOCAL_LIMIT)
        values = {s.metric: s.value for s in extract(lines, entry.metrics or DEFAULT_METRICS)}
    except Exception:  # a damaged or removed run shows no metrics; its page says why
        return {}
    if entry.state in FINISHED_STATES:  # as the index last saw it: its logs were complete before that
        FINISHED_VALUES[key] = values
    return values


def bounded(lines: Iterable[str], limit: int) -> Iterable[str]:
    """The last lines of `lines` whose sizes add up to at most `limit` characters."""
    kept: collections.deque[str] = collections.deque()
    size = 0
    for line in lines:
        kept.append(line)
        size += len(line)
        while size > limit and kept:
            size -= len(kept.popleft())
    return kept


def locate(provider: str, job: str) -> tuple[Provider, str, job_index.Entry | None]:
    """The provider and id of a job the page names (the index knows its provider, else the one given)."""
    entry = job_index.find(job, provider or None)
    chosen = get_provider(entry.provider if entry else provider or registry.DEFAULT_PROVIDER)
    return chosen, entry.job_id if entry else job, entry


def job_page(followers: Followers, provider: str, job: str) -> dict[str, Any]:
    """One job: its state per node, its timeline, its metrics' values in order, its request as the dry run
    printed it. Its values and re-forms come from the job's follower (log_stream.py), which reads its log once for
    every page; a follower just started is given up to FIRST_READ to catch up. The logs stream apart."""
    chosen, job_id, entry = locate(provider, job)
    definitions = (entry.metrics if entry else None) or DEFAULT_METRICS
    follower = followers.watch((chosen.name, job_id), lambda: chosen.logs(job_id, follow=True), definitions, 0)
    try:
        status = chosen.status(job_id)
        state: dict[str, Any] = {"state": status.state, "reason": status.reason, "nodes": status.nodes}
    except Exception as exc:
        state = {"state": "unknown", "reason": str(exc), "nodes": {}}
    events: list[dict[str, Any]] = []
    failure: list[dict[str, Any]] = []
    try:
        events = [{"time": e.time, "node": e.node, "what": redact_text(e.what)} for e in chosen.events(job_id)]
    except Exception as exc:  # a job its scheduler forgot, expired credentials: the index's course, and why
        failure = [{"time": None, "node": "", "what": f"no timeline from {chosen.name}: {exc}"}]
    if not events and entry is not None:
        events = index_events(entry, state["state"])
    events = failure + events
    # What was sent, as the dry run printed it: kept by the provider (a local run's request.yaml), else by the job
    # index for every job launched (session.index_job).
    try:
        request = chosen.dry_run(job_id)
    except Exception:
        request = None
    request = request or (entry.request if entry else None)
    while not follower.ended and time.monotonic() - follower.started < FIRST_READ:
        if time.monotonic() - follower.last_line > SETTLED:
            break  # caught up: a running job that prints nothing now
        time.sleep(0.02)
    samples, elastic = follower.values()
    if follower.error:
        state["reason"] = f"{state['reason'] or ''} (logs: {follower.error})".strip()
    return {"provider": chosen.name, "id": job_id, "name": entry.name if entry else job, **state,
            "metrics": samples, "events": merge(events, elastic),
            "request": redact_text(request) if request is not None else None}  # fmt: skip


def index_events(entry: job_index.Entry, state: str) -> list[dict[str, Any]]:
    """The job's course as the job index saw it, where the provider gives none (a third party's, or one that no
    longer knows the job): submitted, then how it ended and when it was first seen ended; a running job, the first."""
    events = [{"time": entry.submitted, "node": "", "what": "submitted"}]
    ended = state if state in FINISHED_STATES else entry.state if entry.state in FINISHED_STATES else None
    if ended:
        events.append({"time": entry.finished, "node": "", "what": ended.lower()})
    return events


def merge(events: list[dict[str, Any]], elastic: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The provider's events with the re-forms seen in the logs (which carry no time) before the job's end."""
    if not elastic:
        return events
    ended = bool(events) and events[-1]["node"] == "" and events[-1]["what"] != "submitted"
    return [*events[:-1], *elastic, events[-1]] if ended else [*events, *elastic]


def serve(host: str, port: int, say: Callable[[str], None]) -> None:
    """Serve until interrupted; `say` gets the URL (with its token) once."""
    dashboard = Dashboard(host, port)
    say(dashboard.url)
    thread = threading.Thread(target=dashboard.serve_forever, name="cloudddp-ui", daemon=True)
    thread.start()
    try:
        thread.join()
    except KeyboardInterrupt:
        dashboard.shutdown()
