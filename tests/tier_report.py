"""Minutes per tier, and a check that every real part ran, read from a pytest junit report.

    python tests/tier_report.py REPORT.xml [REPORT.xml ...] [--optional notebook]

tests/tiers.py writes each test's tier and components into the report as properties. This prints the
tests and minutes per tier (so a change that eats the test budget is seen at once) and exits 1 when a
component of tiers.COMPONENTS had no test *executed* in the reports together (passed or failed; a skip does
not count), unless it is named in --optional. Standard library only: it runs after pytest, from the Makefile.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from tiers import COMPONENTS, TIERS


@dataclass(frozen=True)
class Case:
    nodeid: str
    tier: str
    components: frozenset[str]
    seconds: float
    executed: bool


def read_cases(report: Path) -> list[Case]:
    cases = []
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") or "" for p in case.iter("property")}
        cases.append(
            Case(
                nodeid=f"{case.get('classname')}::{case.get('name')}",
                tier=props.get("tier", "?"),
                components=frozenset(filter(None, props.get("components", "").split(","))),
                seconds=float(case.get("time") or 0),
                executed=case.find("skipped") is None,
            )
        )
    return cases


def summary(cases: list[Case]) -> list[str]:
    count: Counter[str] = Counter()
    seconds: defaultdict[str, float] = defaultdict(float)
    for case in cases:
        count[case.tier] += 1
        seconds[case.tier] += case.seconds
    lines = ["tier        tests   test-minutes (summed over workers)"]
    for tier in [*TIERS, "?"]:
        if count[tier]:
            lines.append(f"{tier:<10} {count[tier]:>6}   {seconds[tier] / 60:8.2f}")
    lines.append(f"{'all':<10} {sum(count.values()):>6}   {sum(seconds.values()) / 60:8.2f}")
    return lines


def missing_components(cases: list[Case], optional: set[str]) -> list[str]:
    executed = {name for case in cases if case.executed for name in case.components}
    return [name for name in COMPONENTS if name not in executed and name not in optional]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("reports", type=Path, nargs="+")
    parser.add_argument("--optional", default="", help="comma-separated components this run may leave out")
    args = parser.parse_args(argv)
    cases = [case for report in args.reports for case in read_cases(report)]
    print("\n".join(summary(cases)))
    unknown = sorted({c.tier for c in cases} - set(TIERS))
    missing = missing_components(cases, set(filter(None, args.optional.split(","))))
    for name in missing:
        print(f"tier_report: no test of component '{name}' ({COMPONENTS[name]}) was executed", file=sys.stderr)
    if unknown:
        print(f"tier_report: tests without a tier in {[str(r) for r in args.reports]}: {unknown}", file=sys.stderr)
    return 1 if missing or unknown else 0


if __name__ == "__main__":
    sys.exit(main())
