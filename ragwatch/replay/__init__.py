"""Replay: the prober that sends golden or recorded questions to a live service and measures the answers.

``prober`` runs (once or on a schedule) and reports; ``options`` holds and checks what one replay needs;
``mapping`` turns a question into a request body and a response into an answer and chunk ids; ``client``
sends one probe over HTTP and classifies its failure; ``summary`` aggregates a run and records its metrics;
``source`` loads the questions and measures drift.

May import: ``ragwatch.capture.probe`` / ``capture.asgi`` (the probe signature and header),
``ragwatch.queue``, ``ragwatch.metrics``, ``ragwatch.scoring.retrieval_metrics`` and the top-level
foundations. Only the CLI imports it.
"""
