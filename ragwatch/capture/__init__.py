"""Capture: what runs in the host's request thread.

Owns the public :class:`~ragwatch.capture.watch.RagWatch` object, the decorators and wrappers by kind
(``instrument``), the call objects and stages that record one retrieval / generation / request (``stages``),
stream proxies, the ASGI middleware, the normalisation of chunks, responses and prices, and the per-request
:class:`~ragwatch.capture.run.Run`.

May import: ``ragwatch.sampling``, ``ragwatch.queue``, ``ragwatch.mode`` (the watcher and the pure state),
``ragwatch.metrics`` and the top-level foundations (``errors``, ``settings``, ``guard``, ``labels``).
Never the scoring side (``scoring``, ``report``, ``replay``, ``mode.sla``), with one documented exception:
``capture.watch`` builds the in-process scorer lazily when it scores on ``memory://``, or the judging of its own
samples under ``content_off`` with a shared queue (see ARCHITECTURE.md).
"""
