"""`cloudddp ui` serves only files that ship in the package: a wheel built from the sources (`pip wheel`, as a
release builds it) holds every file of cloudddp/ui/server.py's STATIC list and uPlot's licence, a clean venv
that installed the wheel alone reads each of them through importlib.resources, and the dashboard run from that
venv serves its page and every static file byte for byte.

The sources are copied under tmp_path first: pip builds in place (build/, *.egg-info), and tests write only
under their own folder. The wheel is installed with --no-deps (offline, short); for the server's run the venv
then reaches the dependencies through a .pth naming this interpreter's site-packages, which adds the folder only
(the working tree's editable-install hook there is not run), so cloudddp itself is the wheel's."""

from __future__ import annotations

import http.client
import shutil
import signal
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from helpers import REPO

from cloudddp.ui.server import STATIC

pytestmark = [pytest.mark.process, pytest.mark.slow]  # the full tier: ~11 s of pip and venv
SHIPPED = [*STATIC, "uPlot.LICENSE"]


def test_the_wheel_ships_the_dashboards_files_and_a_clean_venv_reads_them(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(REPO / "cloudddp", source / "cloudddp", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir", "-q", "-w",
                            str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("cloudddp-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"cloudddp/ui/static/{name}" for name in SHIPPED} <= names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-cache-dir", "-q",
                                str(wheel)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    read = ("import sys; from importlib.resources import files; static = files('cloudddp.ui') / 'static'; "
            "print(static); [print(name, len((static / name).read_bytes())) for name in sys.argv[1:]]")  # fmt: skip
    shown = subprocess.run([str(python), "-I", "-c", read, *SHIPPED], capture_output=True, text=True, cwd=tmp_path,
                           timeout=60)  # fmt: skip  # -I: no PYTHONPATH, no working folder, no user site
    assert shown.returncode == 0, shown.stderr
    where, *sizes = shown.stdout.splitlines()
    assert where.startswith(str(venv))  # the installed copy, not the working tree's
    assert [line.split()[0] for line in sizes] == SHIPPED
    for line in sizes:
        name, size = line.split()
        assert int(size) == (REPO / "cloudddp" / "ui" / "static" / name).stat().st_size, name

    # The dashboard from the wheel: its page and files over HTTP, as a browser gets them.
    (
        venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages" / "dependencies.pth"
    ).write_text(sysconfig.get_paths()["purelib"] + "\n")
    serve = ("import cloudddp; from cloudddp.ui.server import Dashboard; d = Dashboard('127.0.0.1', 0, 'tok'); "
             "print(d.server_port, cloudddp.__file__, flush=True); d.serve_forever()")  # fmt: skip
    server = subprocess.Popen([str(python), "-I", "-c", serve], stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                              start_new_session=True)  # fmt: skip
    try:
        assert server.stdout is not None
        port, package = server.stdout.readline().split()
        assert package.startswith(str(venv))
        for path, name in [("/?token=tok", "index.html"), *((f"/static/{name}", name) for name in STATIC)]:
            connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
            connection.request("GET", path, headers={"Host": f"127.0.0.1:{port}", "X-Cloudddp-Token": "tok"})
            answer = connection.getresponse()
            assert answer.status == 200, path
            assert answer.read() == (REPO / "cloudddp" / "ui" / "static" / name).read_bytes(), path
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()
