"""The ``steeple`` command line: :mod:`appliance.cli.main` parses and dispatches every
command (``python -m appliance`` runs it); the other modules hold the commands by subject."""
