"""Scoring: the worker side — the worker loop, the judges, diagnosis, evaluation events, health endpoints.

``worker`` reads samples from the queue and writes scores and windows; ``judges`` score a sample and do
no I/O of their own (except the LLM judge's HTTP client); ``embedded`` runs the same worker in the service
process on ``memory://`` (and, under ``content_off`` with a shared queue, judges samples before they
leave); ``evaluate`` scores a labelled set for the ``ragwatch eval-judge`` command, ``alert_eval`` builds
windows of known-quality cases from one for ``ragwatch eval-alerts`` (``alert_cli``: the command's options
and tables).

May import: ``ragwatch.queue``, ``ragwatch.sampling``, ``ragwatch.mode``, ``ragwatch.metrics``,
``ragwatch.capture.run`` / ``capture.pricing`` (the LLM judge suppresses its own capture and prices its
calls) and the top-level foundations. Never ``report``, ``replay`` or ``cli``.
"""
