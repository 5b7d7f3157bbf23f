"""Decision logging: ``KVPIPE_LOG=1`` writes what the package decides -- which
compiler it uses, cache hits and misses, compilations, kernel loads and
launches -- to standard error, one line each, prefixed ``kvpipe:``.

It is the standard ``logging`` logger ``"kvpipe"``: an application can also
attach its own handler instead of setting the variable.
"""

from __future__ import annotations

import logging
import os
import sys

logger = logging.getLogger("kvpipe")


def _enabled(value: str) -> bool:
    return value.strip().lower() not in ("", "0", "false", "no", "off")


def configure() -> None:
    """Applies ``KVPIPE_LOG`` (called once, when the package is imported)."""
    if not _enabled(os.environ.get("KVPIPE_LOG", "")):
        return
    if any(getattr(h, "_kvpipe", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("kvpipe: %(message)s"))
    handler._kvpipe = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)


def log(message: str, *args: object) -> None:
    """Logs a decision (a no-op unless logging is on)."""
    logger.debug(message, *args)
