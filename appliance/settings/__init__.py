"""The appliance's settings: one typed object (:mod:`~appliance.settings.model`), every
setting in one declarative table (:mod:`~appliance.settings.table`) with the parsers of
its values (:mod:`~appliance.settings.values`), resolved once at start from defaults, a
TOML file, the environment, secret files and flags (:mod:`~appliance.settings.load`).
Import each name from its module: this package re-exports nothing.
"""
