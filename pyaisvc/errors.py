"""Error types shared by the library and the CLI.

Library modules raise their own subclasses of AisvcError; the CLI catches
AisvcError once, prints "pyaisvc: message" to stderr and exits 1. A traceback
therefore always means a bug.
"""


class AisvcError(Exception):
    """Base class: a problem the user can act on, with a message saying what to do."""


class CommandError(AisvcError):
    """A CLI verb failed; the message reads "verb: what went wrong"."""
