"""Moved to :mod:`ragwatch.report.dashboard`.

Kept so that the documented ``ragwatch.dashboard`` imports keep working.
"""

from ragwatch.report.dashboard import Dashboard, Response, asgi_app, dashboard_json, dashboard_page, render_html

__all__ = ["Dashboard", "Response", "asgi_app", "dashboard_json", "dashboard_page", "render_html"]
