"""Make the screenshots of `ll report` that docs show: the shipped fork and sub-loop examples.

Run: python scripts/report_screenshots.py   (needs Debian's `chromium`; writes docs/images/)

Each example is run for real in a temporary directory with `--report`, and the page is shot
in headless Chromium at 1280 pixels wide. The pages' sizes are printed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "images"
EXAMPLES = {
    "report-deploy-tree": ["loops/deploy-tree.yaml"],
    "report-release": ["loops/release.yaml", "--set", "us_healthy=false"],
}


def main() -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("no chromium here: apt-get install chromium")
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        for name, args in EXAMPLES.items():
            page = where / f"{name}.html"
            loop, *rest = args
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "little_loops",
                    "run",
                    str(REPO / loop),
                    *rest,
                    "-q",
                    "--report",
                    str(page),
                ],
                cwd=where,
                capture_output=True,
                check=False,
            )
            shot = OUT / f"{name}.png"
            subprocess.run(
                [
                    browser,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--hide-scrollbars",
                    f"--user-data-dir={where / 'profile'}",
                    "--window-size=1280,1400",
                    f"--screenshot={shot}",
                    page.as_uri(),
                ],
                capture_output=True,
                check=True,
            )
            print(f"{loop}: report {page.stat().st_size / 1000:.0f} KB, {shot.relative_to(REPO)}")


if __name__ == "__main__":
    main()
