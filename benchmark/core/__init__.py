"""The foundations every other package stands on: error types that name the field and the
allowed values, string-keyed registries, TOML reading limits, and atomic file writes and safe
loads.

May import: nothing.
"""
