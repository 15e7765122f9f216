"""`cloudddp ui` (cloudddp/ui/server.py): who it lets in, what it serves, and both pages in a real browser.

The access checks follow Jupyter's token model (jupyter_server/auth/identity.py): a token from the printed URL,
then a cookie; Host and Origin checked against DNS rebinding; actions by POST with a header. The browser test
drives Debian's chromium through its chromium-driver (selenium, explicit driver path, headless) against local
runs on this machine: the jobs page lists them, a job's page charts its epochs and tails its log, and Cancel stops
a running job."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import cli, run_cli, wait_until
from helpers.endpoints import silent_endpoint

from cloudddp import job_index
from cloudddp.providers import get_provider
from cloudddp.ui.server import COOKIE, HEADER, STATE_DEADLINE, Dashboard

pytestmark = pytest.mark.network  # the dashboard's server on 127.0.0.1, in this process
TOKEN = "t0ken-for-the-test"


@pytest.fixture
def dashboard(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Dashboard]:
    monkeypatch.chdir(tmp_path)  # the local provider's runs folder: ./cloudddp-runs, as for the user
    server = Dashboard("127.0.0.1", 0, TOKEN)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def ask(server: Dashboard, path: str, method: str = "GET", headers: dict[str, str] | None = None,
        body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=30)
    sent = {"Host": f"127.0.0.1:{server.server_port}", **(headers or {})}
    connection.request(method, path, body=body, headers=sent)
    answer = connection.getresponse()
    return answer.status, dict(answer.getheaders()), answer.read()


def test_nothing_without_the_token(dashboard: Dashboard) -> None:
    for path in ("/", "/api/jobs", "/static/app.js", "/?token=wrong"):
        assert ask(dashboard, path)[0] == 403, path
    assert ask(dashboard, "/api/jobs", headers={HEADER: "wrong"})[0] == 403


def test_the_token_in_the_url_becomes_a_cookie_the_other_requests_carry(dashboard: Dashboard) -> None:
    status, headers, page = ask(dashboard, f"/?token={TOKEN}")
    assert status == 200 and b"/static/app.js" in page
    assert headers["Set-Cookie"] == f"{COOKIE}={TOKEN}; HttpOnly; SameSite=Strict; Path=/"
    status, _, script = ask(dashboard, "/static/uPlot.iife.min.js", headers={"Cookie": f"{COOKIE}={TOKEN}"})
    assert status == 200 and b"uPlot" in script
    assert json.loads(ask(dashboard, "/api/jobs", headers={HEADER: TOKEN})[2])["jobs"] == []


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "rebound.example:80"},  # DNS rebinding: another site's name resolved to 127.0.0.1
        {"Origin": "http://rebound.example"},
        {"Origin": "null"},
    ],
)
def test_a_foreign_host_or_origin_is_refused_even_with_the_token(dashboard: Dashboard, headers: dict[str, str]) -> None:
    assert ask(dashboard, "/api/jobs", headers={HEADER: TOKEN, **headers})[0] == 403


def test_actions_need_the_header_not_only_the_cookie(dashboard: Dashboard) -> None:
    """A form on another site can make the browser send the cookie, never a header of its own."""
    body = json.dumps({"provider": "local", "id": "nope"}).encode()
    assert ask(dashboard, "/api/cancel", "POST", {"Cookie": f"{COOKIE}={TOKEN}"}, body)[0] == 403
    status, _, answer = ask(dashboard, "/api/cancel", "POST", {HEADER: TOKEN}, body)
    assert status == 400 and "nope" in json.loads(answer)["error"]


def test_only_the_listed_files_are_served(dashboard: Dashboard) -> None:
    for path in ("/static/../server.py", "/static/%2e%2e/server.py", "/static/", "/etc/passwd", "/static/app.js/x"):
        assert ask(dashboard, path, headers={HEADER: TOKEN})[0] == 404, path


def events(server: Dashboard, path: str) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of `path` until the server ends the stream: (event name, its data)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=30)
    connection.request("GET", path, headers={"Host": f"127.0.0.1:{server.server_port}", HEADER: TOKEN})
    answer = connection.getresponse()
    assert answer.status == 200 and answer.getheader("Content-Type") == "text/event-stream; charset=utf-8"
    received = []
    for message in answer.read().decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in message.splitlines() if not line.startswith(":"))
        if "data" in fields:
            received.append((fields.get("event", "message"), json.loads(fields["data"])))
    return received


def test_a_nodes_log_streams_its_last_lines_and_says_what_it_skipped(dashboard: Dashboard, tmp_path: Path) -> None:
    """A finished local run (its folder as the runner writes it) with a 5000-line burst: the stream sends each
    node's kept tail once, with the count it skipped, then its end."""
    run_dir = tmp_path / "cloudddp-runs" / "burst-20261129-050000"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "state.json").write_text(json.dumps({"state": "SUCCEEDED", "nodes": {"node-0": {"exit_code": 0}}}))
    (run_dir / "logs" / "node-0.log").write_text("".join(f"line {i}\n" for i in range(5000)))
    (run_dir / "logs" / "node-1.log").write_text("rank 1 says goodbye\n")
    received = events(dashboard, f"/api/logs?provider=local&id={run_dir}")
    (first_name, first), *_, (last_name, last) = received
    assert first_name == "message" and first["reset"] is True
    lines: dict[str, list[str]] = {"node-0": [], "node-1": []}
    skipped = 0
    for _, message in received[:-1]:  # as many messages as the follower's reads spanned periods
        assert all(len(added) <= 200 for added in message["lines"].values())  # never more than it keeps
        for node, added in message["lines"].items():
            lines[node] += added
        skipped += message["skipped"].get("node-0", 0)
    assert lines["node-0"][-200:] == [f"line {i}" for i in range(4800, 5000)]  # what the page keeps
    assert len(lines["node-0"]) + skipped == 5000 and lines["node-1"] == ["rank 1 says goodbye"]
    assert (last_name, last) == ("end", {"error": ""})
    assert dashboard.followers.running == {}  # forgotten once ended: nothing held for a page that left


def test_an_unknown_jobs_stream_ends_saying_why(dashboard: Dashboard) -> None:
    (_, first), (name, end) = events(dashboard, "/api/logs?provider=local&id=nope")
    assert first == {"lines": {}, "skipped": {}, "reset": True}
    assert name == "end" and "no local run 'nope'" in end["error"]
    status, _, answer = ask(dashboard, "/api/logs?provider=nowhere&id=x", headers={HEADER: TOKEN})
    assert status == 404 and "nowhere" in json.loads(answer)["error"]
    assert ask(dashboard, "/api/logs?provider=local&id=nope")[0] == 403  # the token first, as everywhere


def test_the_jobs_page_does_not_wait_for_a_provider_that_never_answers(
    dashboard: Dashboard, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A SageMaker endpoint that accepts and never answers: the page answers at once with the state last seen; the
    providers are asked in the background (server.States), under job_list's deadline."""
    with silent_endpoint() as url:
        for name, value in {"AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                            "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
                            "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")
                            }.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        job_index.record("sagemaker", "silent-job-1", "silent", "cloudddp launch", 1)
        started = time.monotonic()
        status, _, body = ask(dashboard, "/api/jobs", headers={HEADER: TOKEN})
        elapsed = time.monotonic() - started
        assert status == 200 and [job["state"] for job in json.loads(body)["jobs"]] == ["unknown (never seen)"]
        assert elapsed < STATE_DEADLINE  # it did not wait for the provider's deadline (here: ~0.05 s)
        assert dashboard.states.asking  # still asking, in the background


# -- in a real browser ------------------------------------------------------------------------------------------------
EPOCHS = """\
import os, sys, time
rank = int(os.environ["RANK"])
for epoch in range(4):
    if rank == 0:
        print(f"epoch={epoch}/4 loss={1.0 / (epoch + 1):.4f} train_acc=0.5 val_acc={0.25 * (epoch + 1):.4f}", flush=True)
print(f"rank {rank} says goodbye", flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""
CHROMEDRIVER = shutil.which("chromedriver")


def browser(screens: Path) -> object:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900",
                 f"--user-data-dir={screens / 'profile'}"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})  # every network request, from DevTools
    home = screens / "home"  # chromium's dconf and caches, in the test's folder rather than ~/.cache
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
    }
    return webdriver.Chrome(service=Service(CHROMEDRIVER, env=env), options=options)


@pytest.mark.slow
@pytest.mark.process
@pytest.mark.torchrun
@pytest.mark.skipif(CHROMEDRIVER is None, reason="Debian's chromium-driver (make debian-deps installs it)")
def test_both_pages_in_chromium_list_chart_tail_and_cancel(
    dashboard: Dashboard, tmp_path: Path, moto_server: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name, value in moto_server.items():  # the dashboard (this process) asks SageMaker on the moto server
        if name.startswith(("AWS_", "CLOUDDDP_")):
            monkeypatch.setenv(name, value)
    (tmp_path / "epochs.py").write_text(EPOCHS)
    done = run_cli("launch", "-p", "local", "--nodes", "2", "--name", "trained", "epochs.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    running = run_cli("launch", "-p", "local", "--nodes", "2", "--name", "sleeper", "--no-wait", "epochs.py", "--",
                      "300", cwd=tmp_path)  # fmt: skip
    assert running.returncode == 0, running.stderr
    on_sagemaker = cli("launch", "-p", "sagemaker", "--no-wait", "--name", "on-sagemaker", "epochs.py", cwd=tmp_path,
                       env={**moto_server, "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]})  # fmt: skip
    assert on_sagemaker.returncode == 0, on_sagemaker.stdout + on_sagemaker.stderr
    jobs = {entry.name: entry for entry in job_index.entries()}
    screens = tmp_path / "screens"
    screens.mkdir()
    driver: Any = browser(screens)

    # The pages redraw themselves every few seconds: read and click in one script, never through an element
    # found earlier (it may have been replaced since: StaleElementReferenceException).
    def text(selector: str) -> str:
        return str(driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.innerText : ''",
                                         selector))  # fmt: skip

    def click(selector: str) -> bool:
        return bool(driver.execute_script("const e = document.querySelector(arguments[0]); e && e.click(); return !!e",
                                          selector))  # fmt: skip

    try:
        driver.get(dashboard.url)
        wait_until(lambda: "sleeper" in text("#jobs") and "SUCCEEDED" in text("#jobs"), 30, "the local jobs listed")
        row = f'tr.job[data-id="{jobs["on-sagemaker"].job_id}"]'
        assert "sagemaker" in text(row) and "on-sagemaker" in text(row)  # its state from moto's DescribeTrainingJob
        assert "trained" in text("#jobs") and "val_acc=1" in text("#jobs")
        driver.save_screenshot(str(screens / "jobs.png"))

        assert click(f'tr.job[data-id="{jobs["trained"].job_id}"]')
        charts = "return Object.fromEntries([...document.querySelectorAll('.chart')].map(c => [c.dataset.metric, c.dataset.points]))"
        wait_until(lambda: driver.execute_script(charts) == {"loss": "4", "train_acc": "4", "val_acc": "4"}, 30,
                   "a chart of each metric with a point per epoch")  # fmt: skip
        ticks = driver.execute_script("return charts.loss.axes[0]._values")  # the x axis' labels, as drawn
        assert ticks and all(float(tick) == int(float(tick)) for tick in ticks), ticks  # value numbers are whole
        wait_until(lambda: "rank 0 says goodbye" in text("#logs") and "rank 1 says goodbye" in text("#logs"), 30,
                   "each node's last line in the streamed log tail")  # fmt: skip
        timeline = text("#timeline")
        assert "submitted" in timeline and timeline.count("started") == 2 and timeline.count("succeeded") == 3
        request = str(driver.execute_script("return document.getElementById('request').textContent"))
        assert request == (Path(jobs["trained"].job_id) / "request.yaml").read_text().rstrip()  # the dry run's text
        driver.set_window_size(1280, 1500)  # the whole page: states, timeline, charts and the tails
        driver.save_screenshot(str(screens / "job.png"))

        driver.get(dashboard.url + f"#/job/local/{jobs['sleeper'].job_id}")
        wait_until(lambda: text("#state") == "RUNNING", 60, "the sleeper shown running")
        wait_until(lambda: "rank 1 says goodbye" in text("#logs"), 60, "a running job's line streamed to its tail")
        driver.execute_script("window.confirm = () => true")
        assert click("#cancel")
        local = get_provider("local")
        wait_until(lambda: local.status(jobs["sleeper"].job_id).done, 60, "the sleeper stopped")
        assert local.status(jobs["sleeper"].job_id).state == "STOPPED"
        wait_until(lambda: "stopped on request" in text("#timeline") and "(ended)" in text("#log-state"), 30,
                   "the stop in the timeline, the tail's end")  # fmt: skip

        # Every request the browser sent (DevTools' Network.requestWillBeSent, the EventSource streams included),
        # not only what the page's performance timeline lists.
        messages = [json.loads(entry["message"])["message"] for entry in driver.get_log("performance")]
        sent = [m["params"]["request"]["url"] for m in messages if m["method"] == "Network.requestWillBeSent"
                and m["params"]["request"]["url"].split(":")[0] in ("http", "https", "ws", "wss", "ftp")]  # fmt: skip
        # (chromium's own chrome:// pages, its first new tab, are not network requests)
        assert any("/api/logs?" in url for url in sent) and any("/static/uPlot" in url for url in sent)
        assert all(url.startswith(f"http://127.0.0.1:{dashboard.server_port}/") for url in sent), sent
    finally:
        driver.quit()
    if os.environ.get("CLOUDDDP_UI_SCREENSHOTS"):  # docs/assets: `CLOUDDDP_UI_SCREENSHOTS=docs/assets pytest ...`
        for name in ("jobs.png", "job.png"):
            shutil.copy(screens / name, Path(os.environ["CLOUDDDP_UI_SCREENSHOTS"]) / f"ui-{name}")
