"""docs/integrations.md: every Python snippet parses, and the ``/metrics`` one runs as written."""

from __future__ import annotations

import ast
import re
import urllib.request
from pathlib import Path

import pytest

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "integrations.md").read_text()
SNIPPETS = re.findall(r"```python\n(.*?)```", PAGE, re.S)


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
def test_every_snippet_parses(snippet: str) -> None:
    ast.parse(snippet)


def test_the_metrics_server_snippet_serves_on_the_port_it_prints(capsys: pytest.CaptureFixture[str]) -> None:
    (snippet,) = [s for s in SNIPPETS if "start_metrics_server(0)" in s]
    namespace: dict = {}
    exec(snippet.replace('RagWatch(service="kb-qa")', 'RagWatch(service="kb-qa", registry=None)'), namespace)
    url = capsys.readouterr().out.split()[-1]
    server = namespace["server"]
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            assert reply.status == 200
    finally:
        server.shutdown()
        server.server_close()
