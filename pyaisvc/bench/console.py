"""Talking to a program that keeps running at the guest's console.

``Guest.run`` covers one shell command that ends; ``llmrun --stdin`` (chat)
and the ``ai`` tool (service mode) stay running while the host types lines
to them. These helpers send such lines and wait for replies with a
deadline, raising the same GuestTimeout / GuestCrashed as ``Guest`` with
the console's tail.
"""

from __future__ import annotations

import re
import time

import pexpect

from pyaisvc.qemu import PANIC, Guest, GuestCrashed, GuestTimeout


def send_line(guest: Guest, line: str) -> None:
    """Types line and Enter at the console."""
    if guest.child is None or not guest.child.isalive():
        raise GuestCrashed("the guest is not running", guest.transcript)
    guest.child.send(line + "\n")


def expect(guest: Guest, patterns: list[str], deadline: float, what: str) -> int:
    """Index of the first pattern seen; GuestCrashed on a panic or exit, GuestTimeout after
    the deadline (time.monotonic())."""
    child = guest.child
    if child is None:
        raise GuestCrashed(f"the guest is not running (waiting for {what})")
    i = child.expect(patterns + [PANIC, pexpect.EOF, pexpect.TIMEOUT],
                     timeout=max(0.0, deadline - time.monotonic()))
    if i < len(patterns):
        return i
    if i == len(patterns) + 2:
        raise GuestTimeout(f"no {what} within the deadline", guest.transcript)
    raise GuestCrashed(f"the guest {'panicked' if i == len(patterns) else 'exited'} while "
                       f"waiting for {what}", guest.transcript)


def match(guest: Guest) -> re.Match[str]:
    """The match of the last successful expect."""
    assert guest.child is not None and isinstance(guest.child.match, re.Match)
    return guest.child.match
