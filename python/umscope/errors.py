"""Errors the CLI turns into a one-line message and exit code 2."""


class UsageError(Exception):
    """Bad input from the user: unknown name, malformed value, unusable path."""
