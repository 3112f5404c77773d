"""``steeple import-crontab``: a crontab's ``curl`` and ``wget`` lines as schedules.

- ``lines``: the crontab file as cron reads it (entries, environment lines, ``%``);
- ``shell``: one command line as ``sh`` splits it, refusing what is more than one call;
- ``wrappers``: ``timeout``, ``flock -n``, ``nice`` in front of the call;
- ``curl`` and ``wget``: their arguments as one HTTP request;
- ``convert``: the schedules (``steeple apply`` items) and every line not moved, with why.

Pure and standard-library only, besides ``core``'s cron parser and header rules.
"""
