"""Credentials are never stored or shown: what a record, a report, a site or an error line holds is the
text below with every secret in it replaced by ``REDACTED`` (a URL's user information removed).

- ``split_credentials(url)``: (the URL without its user information, ``(user, password)`` or None), for a
  client that must still send them (serve: as a Basic ``Authorization`` header, never in a URL it keeps);
- ``redacted(text)``: any text (a URL, a command line, an exception's message) with
  - a URL's user information removed (``http://user:password@host`` -> ``http://host``),
  - a query parameter named like a secret (``?token=``, ``&key=``, ``api_key=``, ``sig=``) given REDACTED,
  - the value of a flag named like one (``--api-key X``, ``--token=X``, ``--password X``),
  - a header's (``Authorization: Bearer X``, ``-H "X-Api-Key: X"``, ``Cookie: ...``) and ``Bearer X``,
  - an environment assignment (``HF_TOKEN=X``, ``OPENAI_API_KEY=X``, ``DB_PASSWORD=X``);
- ``redacted_value(name, value)``: an environment variable's value as recorded (``redacted``, and all of
  it where the name says secret);
- ``scrubbed(value, secrets)``: a record's fields (nested dicts, lists, strings) with each known secret (the
  password or key a client sent, ``MIN_SECRET`` characters or more) replaced, wherever a peer echoed it.

A name says secret when it is one of ``SECRET_WORDS`` (``token``, ``key``, ``password``, ...; any case) or
ends in one after ``_``, ``-`` or ``.``: ``TPU_API_KEY``, ``x-api-key`` and ``?sig=`` are secrets,
``OMP_NUM_THREADS``, ``monkey`` and ``--key-options`` are not.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

REDACTED = "REDACTED"
SECRET_WORDS = ("token", "secret", "password", "passwd", "pwd", "passphrase", "key", "apikey", "auth",
                "authorization", "credential", "credentials", "cookie", "signature", "sig", "session")
_WORD = "|".join(sorted(SECRET_WORDS, key=len, reverse=True))
_NAME = rf"(?:[A-Za-z0-9._-]*[_.-])?(?:{_WORD})"    # a secret word, alone or after a separator: HF_TOKEN, x-api-key
_HEADER = r"(?:proxy-)?authorization|cookie|(?:[A-Za-z0-9]+-)+(?:key|token|secret|auth)"
_VALUE = r"""(?:'[^']*'|"[^"]*"|[^\s'"&#]+)"""          # a shell word, quoted or not
_RULES = [
    # scheme://user:password@host -> scheme://host (the user information is dropped whole)
    (re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s'\"]*@"), r"\1"),
    # a header: Authorization: Bearer X, Proxy-Authorization: Basic X, X-Api-Key: X, Cookie: a=b
    (re.compile(rf"(?i)\b({_HEADER})(\s*:\s*)(?:(bearer|basic|token|digest)\s+)?"
                r"""[^\s'"]+"""), lambda m: f"{m[1]}{m[2]}{m[3] + ' ' if m[3] else ''}{REDACTED}"),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+"), rf"\1{REDACTED}"),
    # --api-key X, --token=X, -p X is left alone (a short flag says nothing of its value)
    (re.compile(rf"(?i)(?<![\w-])(--{_NAME})(=|\s+)(?!-){_VALUE}"), rf"\1\2{REDACTED}"),
    # ?token=X, &api_key=X, HF_TOKEN=X (a query parameter or an environment assignment)
    (re.compile(rf"(?i)(?<![\w.-])({_NAME})={_VALUE}"), rf"\1={REDACTED}"),
]
_SECRET_NAME = re.compile(rf"(?i)^{_NAME}$")


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag, header or parameter named ``name`` holds a secret (module docstring)."""
    return bool(_SECRET_NAME.match(name.lstrip("-").replace("-", "_")))


def redacted(text: str) -> str:
    """``text`` with every secret the module docstring lists replaced (the user information removed)."""
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


def redacted_value(name: str, value: str) -> str:
    """An environment variable's value as it may be recorded."""
    return REDACTED if is_secret_name(name) else redacted(value)


MIN_SECRET = 6   # a shorter secret is not searched for in a record (it would cut words of other text)


def scrubbed(value, secrets: tuple[str, ...]):
    """``value`` (a record's field) with every string's occurrences of ``secrets`` replaced by REDACTED."""
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED) if len(secret) >= MIN_SECRET else value
        return value
    if isinstance(value, dict):
        return {scrubbed(k, secrets): scrubbed(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrubbed(v, secrets) for v in value]
    return value


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """(``url`` without its user information, (user, password) percent-decoded, or None where it had none)."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)), (unquote(user), unquote(password))
