"""The history of benchmarked runs: every run remembered, change points and slow creep found,
the trend drawn.

``runs`` holds what a history records about a run (when, where, which commit, which CI job) and
``identity`` finds it out; ``store`` appends runs to a SQLite file or a PostgreSQL database and
reads them back; ``record`` is the pytest session's side (the creep gate's reads, the append at
the end); ``series``, ``changepoints`` and ``trend`` turn the stored runs into per-benchmark
series with their change points and creep; ``creep`` is the opt-in gate; ``views``,
``dashboard`` and ``comment`` render them for the ``cnnperf`` command.

Nothing here is imported when the plugin loads; numpy, scipy, ruptures and matplotlib only by
the analysis and the dashboard, psycopg only for a PostgreSQL history.
"""
