"""Degraded mode: the pure state machine, the worker-side SLA evaluator, the service-side watcher.

``degrade`` is pure (policy, state, the step function) and may be imported from anywhere. ``watcher`` is the
service side: it reads the mode and applies it. ``sla`` is the scoring side: it turns score windows into
mode changes; the service never imports it.

May import: ``ragwatch.queue.contract``, ``ragwatch.metrics`` and the top-level foundations.
"""
