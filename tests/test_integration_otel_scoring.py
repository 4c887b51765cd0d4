"""The span processor scores (issue 30, item 1): the documented snippet (docs/integrations.md, formerly the
README's), run unchanged in a fresh process with no Redis, must start the in-process scorer and the mode
watcher from the first span it reads — the runs it builds never pass through ``open_run``, which is where
the decorators start them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_snippet() -> str:
    """The span-processor snippet as the integration docs publish it (moved there from the README)."""
    page = (ROOT / "docs" / "integrations.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    (snippet,) = [b for b in blocks if "RagwatchSpanProcessor(rw)" in b]
    return snippet


# Spans as an OpenTelemetry GenAI instrumentation writes them: a retrieval with its documents and a chat
# with its messages, under one root per request.
DRIVER = """
import json, time
tracer = provider.get_tracer("app")
docs = json.dumps([{"id": "hotel", "content": "Hotels are reimbursed up to 600 CNY per night."},
                   {"id": "taxi", "content": "Taxis are reimbursed with receipts."}])
for i in range(2):  # the in-process scorer's budget: 2 samples a second
    with tracer.start_as_current_span("POST /ask"):
        with tracer.start_as_current_span("retrieval", attributes={
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.query.text": "How much for hotels per night?",
            "gen_ai.retrieval.documents": docs}):
            pass
        with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 9,
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                {"type": "text", "content": "Hotels are reimbursed up to 600 CNY per night."}]}])}):
            pass
rw.flush()
deadline = time.monotonic() + 60
while len(rw.scores()) < 2 and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps({"scorer": rw.scorer.running, "mode": rw.mode_watcher.running,
                  "scores": [sorted(r.get("scores", {})) for r in rw.scores()]}))

"""


def test_the_documented_span_processor_snippet_scores_in_process() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")}
    env["RAGWATCH_SAMPLE_RATE"] = "1"  # every trace sampled: the test waits for scores, not for luck
    done = subprocess.run(
        [sys.executable, "-c", readme_snippet() + DRIVER],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["scorer"] and found["mode"]
    assert len(found["scores"]) == 2
    assert all({"context_precision_3", "faithfulness"} <= set(names) for names in found["scores"])
