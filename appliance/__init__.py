"""Steeple: a self-hosted scheduler appliance."""

__version__ = "0.1.0"
