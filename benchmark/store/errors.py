"""What can go wrong in a store: a result that exists, a run that is locked, a damaged file."""

from __future__ import annotations


class ResultExistsError(RuntimeError):
    """A finished result would be overwritten."""


class RunLockedError(RuntimeError):
    """Another process is running the same run id right now."""


class StoreWarning(UserWarning):
    """A store file is damaged: it is named, set aside or skipped, and the rest goes on."""


class CorruptRecord(ValueError):
    """A result JSON that is not a run record."""
