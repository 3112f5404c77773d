"""Steeple's reliability proof suite (issue 4): see docs/reliability.md."""
