"""Gating against another git revision of the project measured in the same run
(``--cnnperf-against``): its worktree, its pytest process, and the check that it runs its own
code."""
