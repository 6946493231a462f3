"""Load a report.html in headless Chromium and fail on any console message or page error.

Usage::

    python scripts/tools/check_report.py runs/<run>/report.html [--screenshot out.png]
        [--window-size 1400,5000] [--timeout 90]

Chromium runs headless with a fresh profile, no network (every host name resolves to
nothing) and its log on stderr; any ``CONSOLE`` line (the report has no scripts, so any
console output is an error), ``Uncaught`` exception or ``ERROR:`` line that names the page
fails the check. Before that, the HTML itself is checked: every ``src``/``href`` must be a
``data:`` URI or an in-page ``#anchor``, and every embedded image must decode to a PNG.

Exit status: 0 clean, 1 problems found (listed on stderr), 2 Chromium missing or failed.
"""

from __future__ import annotations

import argparse
import base64
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def find_browser() -> str | None:
    """Path of the first Chromium-like browser on PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def static_problems(text: str) -> list[str]:
    """Problems visible in the HTML source: outside references and broken images."""
    problems = []
    for attr, value in re.findall(r'\b(src|href)\s*=\s*"([^"]*)"', text, flags=re.I):
        if not (value.startswith("data:") or value.startswith("#")):
            problems.append(f"{attr} refers outside the file: {value[:80]!r}")
    for match in re.finditer(r'src="data:image/png;base64,([^"]*)"', text):
        try:
            data = base64.b64decode(match.group(1), validate=True)
        except ValueError:
            problems.append("an embedded image is not valid base64")
            continue
        if not data.startswith(PNG_MAGIC):
            problems.append("an embedded image is not a PNG")
    if re.search(r"<script\b", text, flags=re.I):
        problems.append("the report contains a <script> element")
    return problems


def page_problems(log: str, url: str) -> list[str]:
    """Console messages, uncaught exceptions and page errors in Chromium's stderr log."""
    out = []
    for line in log.splitlines():
        if "CONSOLE" in line or "Uncaught" in line:
            out.append(line.strip())
        elif "ERROR:" in line and (url in line or "file://" in line):
            out.append(line.strip())
    return out


def check(
    path: Path, *, screenshot: Path | None = None, window: str = "1400,5000", timeout: float = 90.0
) -> tuple[int, list[str]]:
    """Check one report; return ``(exit status, problems)``."""
    path = path.resolve()
    if not path.is_file():
        return 2, [f"{path}: no such file"]
    problems = static_problems(path.read_text(encoding="utf-8"))
    browser = find_browser()
    if browser is None:
        return 2, problems + ["no Chromium on PATH"]
    url = path.as_uri()
    with tempfile.TemporaryDirectory(prefix="check-report-") as profile:
        shot = screenshot.resolve() if screenshot else Path(profile) / "shot.png"
        cmd = [
            browser,
            *FLAGS,
            f"--user-data-dir={profile}/user",
            f"--screenshot={shot}",
            f"--window-size={window}",
            url,
        ]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            return 2, problems + [f"Chromium did not finish within {timeout:g} s"]
        log = proc.stdout + proc.stderr
        problems += page_problems(log, url)
        if proc.returncode != 0 or not shot.is_file():
            tail = "\n".join(log.splitlines()[-5:])
            return 2, problems + [f"Chromium failed (status {proc.returncode}): {tail}"]
    return (1 if problems else 0), problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="the report.html to check")
    parser.add_argument(
        "--screenshot", type=Path, default=None, help="also keep Chromium's screenshot here"
    )
    parser.add_argument(
        "--window-size", default="1400,5000", help="viewport WIDTH,HEIGHT of the screenshot"
    )
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds")
    args = parser.parse_args(argv)
    status, problems = check(
        args.report, screenshot=args.screenshot, window=args.window_size, timeout=args.timeout
    )
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    if status == 0:
        print(f"ok: {args.report} loads without console errors")
    return status


if __name__ == "__main__":
    sys.exit(main())
