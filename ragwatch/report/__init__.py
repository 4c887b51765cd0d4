"""Report: the health report, the HTML report and live page, and the sources they read scores from.

``build`` is the Markdown/JSON health report, ``view`` the view data the page draws, ``dashboard`` the page
and its HTTP handler, ``sources`` where score records come from (a queue, a JSONL file, a worker's
endpoint), ``web/`` the page's static files.

May import: ``ragwatch.scoring.diagnosis`` (labels and advice), ``ragwatch.mode.degrade``,
``ragwatch.queue.contract`` and the top-level foundations. Only the CLI, the demo, the worker's HTTP
endpoints and the in-process ``RagWatch.report()`` import it.
"""
