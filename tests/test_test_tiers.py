"""The test tiers (tests/tiers.py) and the junit check (tests/tier_report.py) do what make test relies on."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import tier_report
from tiers import COMPONENTS, TIERS, InProcessOnly, in_process_only, tier_of


def test_every_collected_test_has_exactly_one_tier(request: pytest.FixtureRequest) -> None:
    for item in request.session.items:
        tiers = [mark.name for mark in item.iter_markers() if mark.name in TIERS]
        assert len(tiers) == 1, f"{item.nodeid}: {tiers}"
        assert ("tier", tiers[0]) in item.user_properties


@pytest.mark.parametrize(
    ("nodeid", "markers", "fixtures", "expected"),
    [
        ("t.py::test_a", [], ["tmp_path"], "unit"),
        ("t.py::test_a", [], ["moto_server"], "component"),
        ("t.py::test_a", ["slurm"], [], "component"),
        ("t.py::test_a", ["slow", "torchrun"], [], "full"),
        ("t.py::test_a[case]", ["slow"], ["moto_server"], "smoke"),  # listed without its parameters
        ("t.py::test_b", ["parametrize"], [], "unit"),
    ],
)
def test_a_tier_follows_the_smoke_list_then_slow_then_components(
    nodeid: str, markers: list[str], fixtures: list[str], expected: str
) -> None:
    assert tier_of(nodeid, markers, fixtures, smoke=("t.py::test_a",) if "case" in nodeid else ()) == expected


@pytest.mark.parametrize(
    "leave",
    [
        lambda: subprocess.run([sys.executable, "-c", "pass"], check=False),
        lambda: os.posix_spawn("/bin/true", ["true"], os.environ),
        lambda: os.fork(),  # looked up when called: the guard replaces os.fork
        lambda: socket.socket().bind(("127.0.0.1", 0)),
    ],
    ids=["subprocess", "posix_spawn", "fork", "bind"],
)
def test_a_unit_test_cannot_start_a_process_or_bind_a_socket(leave: object) -> None:
    with in_process_only("this test") as tried:
        with pytest.raises(InProcessOnly, match="this test is a unit test"):
            leave()  # type: ignore[operator]
        with contextlib.suppress(Exception):  # code under test that swallows the refusal: still recorded
            leave()  # type: ignore[operator]
    assert len(tried) == 2


def junit(tmp_path: Path, *cases: tuple[str, str, str, bool]) -> Path:
    rows = []
    for name, tier, components, skipped in cases:
        props = f'<property name="tier" value="{tier}"/><property name="components" value="{components}"/>'
        skip = '<skipped message="no slurm"/>' if skipped else ""
        rows.append(
            f'<testcase classname="tests.t" name="{name}" time="30"><properties>{props}</properties>{skip}</testcase>'
        )
    path = tmp_path / "report.xml"
    path.write_text(f"<testsuites><testsuite>{''.join(rows)}</testsuite></testsuites>")
    return path


def test_the_report_fails_a_run_where_a_component_was_only_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    everything_but_slurm = ",".join(name for name in COMPONENTS if name != "slurm")
    report = junit(tmp_path, ("a", "unit", "", False), ("b", "smoke", everything_but_slurm, False),
                   ("c", "component", "slurm", True))  # fmt: skip
    assert tier_report.main([str(report)]) == 1
    out, err = capsys.readouterr()
    assert "no test of component 'slurm'" in err
    assert "unit            1       0.50" in out and "smoke           1       0.50" in out
    assert tier_report.main([str(report), "--optional", "slurm"]) == 0


def test_the_guard_fails_a_unit_test_whose_code_swallows_the_refusal(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("from tiers import guard_unit_test, pytest_collection_modifyitems, pytest_configure  # noqa")
    pytester.makepyfile(
        """
        import contextlib, subprocess

        def test_quiet():
            with contextlib.suppress(Exception):  # as a CLI's `except Exception` that prints one paragraph
                subprocess.run(["true"])
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*unit test *::test_quiet left the process: started a process*"])
