"""The project's pytest run in processes of its own: at another git revision in the same run
(``--cnnperf-against``: its worktree, its pytest process, and the check that it runs its own
code), across revisions (``cnnperf bisect``), and again and again at this one to record how
much the machine's runs differ (``cnnperf noise``)."""
