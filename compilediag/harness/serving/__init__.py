"""Serving (#69): the request stream read and checked before a run, replayed through the
model compiled as the user compiles it (the worker's serving pass), the plans that bound its
graphs applied and measured, and each plan's warm-up verified in fresh processes, with the
cold start timed under empty caches, warm caches and torch's cache artifacts."""
