"""The history of benchmarked runs: every run remembered, change points and slow creep found,
the trend drawn (the modules: CONTRIBUTING.md's code map).

Nothing here is imported when the plugin loads; numpy, scipy, ruptures and matplotlib only by
the analysis and the dashboard, psycopg only for a PostgreSQL history.
"""
