"""URLs as they may be stored and shown: without secrets.

A URL's user info (``user:password@``) is dropped and each query value (``?key=sk-…``) becomes
``***``, the names kept, so an endpoint can be recorded in a manifest, a reply cache or an
error line without what authenticates to it.
"""

from __future__ import annotations

import hashlib
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "***"


def public_url(url: str) -> str:
    """The URL without user info and with every query value redacted (safe to store and show)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # an unparsable URL (a bad port): show only its scheme
        return url.split(":", 1)[0] + "://" + REDACTED
    if port:
        host = f"{host}:{port}"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = urlencode([(name, REDACTED) for name, _ in pairs], safe="*")
    if parts.query and not pairs:  # a query that is no list of name=value: all of it
        query = REDACTED
    return urlunsplit((parts.scheme, host, parts.path, query, ""))


def query_digest(url: str) -> str:
    """A hash of the URL's query and user info: what tells apart two URLs whose public forms
    agree (for a cache key), without holding either."""
    parts = urlsplit(url)
    secret = f"{parts.username or ''}:{parts.password or ''}?{parts.query}#{parts.fragment}"
    return hashlib.sha256(secret.encode()).hexdigest()
