"""Replay: the prober that sends golden or recorded questions to a live service and measures the answers.

May import: ``ragwatch.capture.probe`` / ``capture.asgi`` (the probe signature and header),
``ragwatch.queue``, ``ragwatch.metrics``, ``ragwatch.scoring.retrieval_metrics`` and the top-level
foundations. Only the CLI imports it.
"""
