"""Rebuild docs/report.png, the README's picture of the HTML report, from a real ``ragwatch demo`` run.

Usage: python scripts/screenshot_report.py [OUT.png] [--html OUT.html]

The demo's service, offline judge and breaker run as in ``ragwatch demo``; the page is the one ``ragwatch
report --html`` writes, opened in the system Chromium (headless, offline flags) and captured at 0.75 scale so
the committed image stays small.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.servers import CHROMIUM_FLAGS  # noqa: E402  (the flags the page tests use)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default=str(ROOT / "docs" / "report.png"))
    parser.add_argument("--html", help="also keep the HTML report here")
    parser.add_argument("--requests", type=int, default=360)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from ragwatch.demo.run import demo_policy, run_demo
    from ragwatch.report.build import default_thresholds
    from ragwatch.report.dashboard import render_html
    from ragwatch.report.view import view_data

    result = run_demo(requests=args.requests, seed=7, progress=False, out=lambda _: None)
    data = view_data(
        result.records, default_thresholds(), demo_policy(), source=f"ragwatch demo ({result.requests} requests)"
    )
    html = Path(args.html) if args.html else Path(tempfile.mkdtemp()) / "report.html"
    html.write_text(render_html(data), encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1480}, device_scale_factor=0.75)
        page.goto(html.as_uri())
        page.wait_for_selector(".uplot canvas")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=args.out)
        browser.close()
    print(f"{args.out}: {Path(args.out).stat().st_size // 1024} KB from {len(result.records)} scored samples")


if __name__ == "__main__":
    main()
