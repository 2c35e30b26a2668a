"""Who is annotating: a name per request, checked against per-annotator tokens when configured.

Without `--token-env` the page sends a self-chosen name (`X-Annotator`), which is enough on a
loopback-only server. With `--token-env VAR` the variable holds `name:token,name2:token2`; each
request then carries `X-Annotator: name` and `Authorization: Bearer token`, compared in constant
time (`hmac.compare_digest`), and anything else is answered 401.

Example:
    >>> parse_tokens("alice:s3cret,bob:hunter2")
    {'alice': 's3cret', 'bob': 'hunter2'}
"""

from __future__ import annotations

import hmac

from proofcheck.data.annotate.models import ANNOTATOR_NAME


class AuthError(Exception):
    """A request without a valid identity (answered 401)."""


def parse_tokens(spec: str, source: str = "the token variable") -> dict[str, str]:
    """Parse `name:token,name2:token2`; raise ValueError naming the bad entry."""
    tokens: dict[str, str] = {}
    for n, part in enumerate(spec.split(","), 1):
        part = part.strip()
        if not part:
            continue
        name, sep, token = part.partition(":")
        name, token = name.strip(), token.strip()
        if not sep or not name or not token:
            raise ValueError(f"{source}: entry {n} is not `name:token`")
        if not ANNOTATOR_NAME.match(name):
            raise ValueError(f"{source}: entry {n}: annotator name {name!r} must be 1-64 letters, digits, "
                             "spaces or . _ @ -")
        if name in tokens:
            raise ValueError(f"{source}: annotator {name!r} appears twice")
        tokens[name] = token
    if not tokens:
        raise ValueError(f"{source} is empty; expected `name:token,name2:token2`")
    return tokens


class Authenticator:
    """Resolves a request's annotator name; `tokens=None` means names are self-declared."""

    def __init__(self, tokens: dict[str, str] | None):
        self.tokens = tokens

    @property
    def required(self) -> bool:
        return self.tokens is not None

    def identify(self, name: str | None, authorization: str | None) -> str:
        """The annotator's name, or AuthError with the reason."""
        name = (name or "").strip()
        if not ANNOTATOR_NAME.match(name):
            raise AuthError("send your annotator name in the X-Annotator header "
                            "(1-64 letters, digits, spaces or . _ @ -)")
        if self.tokens is None:
            return name
        scheme, _, token = (authorization or "").partition(" ")
        expected = self.tokens.get(name, "")
        # Compare even for unknown names so the timing does not reveal which names exist.
        ok = hmac.compare_digest(token.strip().encode(), expected.encode())
        if scheme.lower() != "bearer" or not expected or not ok:
            raise AuthError("unknown annotator or wrong token")
        return name
