"""The adversarial suite's report: run every attack (``tests/adversarial`` and the cases other
test modules file under a category with ``pytest.mark.attack``) and print one table —
category, attempts, held, failed (naming each case, with why for a known gap).

Usage: ``python bench/adversarial.py [--full] [-- PYTEST ARGS]``. ``--full`` is the full load
run (100 jobs instead of CI's 24). Exit status: pytest's (1 when a case failed).
Needs Docker and ``airlock images build``; gVisor cases need ``scripts/gvisor-setup.sh``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.adversarial import REPORT_ENV, load, render  # noqa: E402

#: Where attack-marked cases live besides tests/adversarial.
ALSO = [
    "tests/integration/test_cli_serve.py::test_a_killed_controller_is_recovered_on_restart",
    "tests/integration/test_controller_service.py",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the full load run (100 jobs)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "outcomes.json"
        env = {**os.environ, REPORT_ENV: str(report)}
        if args.full:
            env["AIRLOCK_LOAD_JOBS"] = "100"
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/adversarial", *ALSO]
        argv += ["-m", "attack", *args.pytest_args]
        done = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=False)
        if not report.exists():
            print(f"no outcome recorded (pytest exit {done.returncode})", file=sys.stderr)
            return done.returncode or 1
        print(render(load(report)))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
