"""Per-key access: which collections an API key may read and load into.

A keys file (YAML or JSON, ``server.keys_file``) lists the keys; each entry names its secret by
an environment variable (``key_env``) or by the SHA-256 of the key (``key_sha256``), never the
key itself, so the file can be shared like config. Keys from ``DEEPSEARCHER_API_KEYS`` may read
and load everything, as before. The middleware resolves the key to an ``Access`` and leaves it
on the request scope, where every route and MCP tool reads it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml

from deepsearcher.errors import ConfigError
from deepsearcher.server.errors import RequestError

SCOPE_KEY = "deepsearcher.access"
# A short digest of the request's key, set with its access: a per-key identity for limits.
KEY_ID_SCOPE_KEY = "deepsearcher.key_id"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_ENTRY_FIELDS = {"name", "key_env", "key_sha256", "read", "load"}


@dataclass(frozen=True)
class Access:
    """What one key may do: ``read`` and ``load`` are collection names or glob patterns
    (``*`` is every collection)."""

    name: str
    read: tuple[str, ...] = ("*",)
    load: tuple[str, ...] = ("*",)

    @property
    def reads_all(self) -> bool:
        return "*" in self.read

    def readable(self, collection: str) -> bool:
        return any(fnmatchcase(collection, p) for p in self.read)

    def may_load(self, collection: str | None = None) -> bool:
        """May load into ``collection``; without one, into any collection at all."""
        if collection is None:
            return bool(self.load)
        return any(fnmatchcase(collection, p) for p in self.load)

    def readable_of(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if self.readable(n)]

    def check_read(self, names: Iterable[str]) -> None:
        """403 for the first collection this key may not read (before any existence check,
        so a refused key learns nothing about what exists)."""
        for name in names:
            if not self.readable(name):
                raise RequestError(
                    403,
                    f"API key '{self.name}' may not read collection '{name}'",
                    type_="permission_error",
                    code="collection_forbidden",
                    hint="GET /v1/models lists the collections this key may read; ask the "
                    "server's operator to add the collection to the key's 'read' list",
                )

    def readable_or_refuse(self, names: Iterable[str]) -> list[str]:
        """The readable ones of ``names``; 403 when there are none, rather than searching
        nothing and calling the store empty."""
        readable = self.readable_of(names)
        if not readable:
            raise RequestError(
                403,
                f"API key '{self.name}' may read none of the collections on this server",
                type_="permission_error",
                code="collection_forbidden",
                hint="ask the server's operator to add collections to the key's 'read' list",
            )
        return readable

    def check_load(self, collection: str | None = None) -> None:
        if self.may_load(collection):
            return
        where = f" into collection '{collection}'" if collection else ""
        raise RequestError(
            403,
            f"API key '{self.name}' may not load documents{where}",
            type_="permission_error",
            code="load_forbidden",
            hint="use a key whose 'load' list in the keys file covers the collection",
        )


FULL_ACCESS = Access("full access")
NO_ACCESS = Access("no key", (), ())


def access_of(scope: Mapping[str, Any]) -> Access:
    """The request's access; full when the server has no keys (or for open paths)."""
    access = scope.get(SCOPE_KEY)
    return access if isinstance(access, Access) else FULL_ACCESS


@dataclass(frozen=True)
class _Key:
    secret: bytes  # the key itself, or the hex SHA-256 of it
    hashed: bool
    access: Access


class KeyRing:
    """The server's keys and what each may do."""

    def __init__(self, keys: Sequence[_Key] = ()) -> None:
        self._keys = list(keys)

    @classmethod
    def full(cls, api_keys: Iterable[str]) -> KeyRing:
        """Plain keys with full access (``DEEPSEARCHER_API_KEYS``)."""
        return cls([_Key(k.encode(), False, FULL_ACCESS) for k in api_keys])

    def __add__(self, other: KeyRing) -> KeyRing:
        return KeyRing([*self._keys, *other._keys])

    def __bool__(self) -> bool:
        return bool(self._keys)

    def resolve(self, token: bytes) -> Access | None:
        """The access of ``token``, or None for an unknown key. Every key is compared (in
        constant time), so timing does not tell which one nearly matched."""
        digest = hashlib.sha256(token).hexdigest().encode()
        found: Access | None = None
        for key in self._keys:
            if hmac.compare_digest(digest if key.hashed else token, key.secret) and found is None:
                found = key.access
        return found


def load_keys_file(path: str | Path, environ: Mapping[str, str] | None = None) -> KeyRing:
    """The keys in a keys file; a malformed file or entry is a ``ConfigError`` naming both."""
    env = os.environ if environ is None else environ
    path = Path(path).expanduser()
    hint = "see 'Per-key access' in the README for the file's format"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read keys file {path}: {exc.strerror or exc}",
            "check server.keys_file (DEEPSEARCHER_SERVER__KEYS_FILE)",
        ) from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"keys file {path} is not valid: {first}", hint) from None
    entries = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"keys file {path} has no 'keys' list", hint)
    keys: list[_Key] = []
    names: set[str] = set()
    for i, entry in enumerate(entries, 1):
        keys.append(_parse_entry(path, i, entry, env, hint))
        name = keys[-1].access.name
        if name in names:
            raise ConfigError(f"keys file {path}, entry {i}: name '{name}' is used twice", hint)
        names.add(name)
    return KeyRing(keys)


def _parse_entry(path: Path, i: int, entry: object, env: Mapping[str, str], hint: str) -> _Key:
    def fail(problem: str, why: str = hint) -> ConfigError:
        return ConfigError(f"keys file {path}, entry {i}{label}: {problem}", why)

    label = ""
    if not isinstance(entry, dict):
        raise fail("must be a mapping with name, key_env or key_sha256, read and load")
    name = entry.get("name")
    label = f" ({name})" if isinstance(name, str) else ""
    unknown = sorted(set(entry) - _ENTRY_FIELDS)
    if unknown:
        raise fail(f"unknown field '{unknown[0]}'", f"fields: {', '.join(sorted(_ENTRY_FIELDS))}")
    if not isinstance(name, str) or not name.strip():
        raise fail("'name' is missing (it names the key in logs and errors)")
    if ("key_env" in entry) == ("key_sha256" in entry):
        raise fail(
            "give exactly one of 'key_env' (an environment variable holding the key) or "
            "'key_sha256' (the key's SHA-256 in hex)",
            'the file holds no plaintext keys; hash one with: printf %s "$KEY" | sha256sum',
        )
    if "key_env" in entry:
        var = entry["key_env"]
        secret = env.get(var, "").strip() if isinstance(var, str) else ""
        if not secret:
            raise fail(f"environment variable {var} is not set", f"export {var}=<the key>")
        key = _Key(secret.encode(), False, FULL_ACCESS)
    else:
        digest = str(entry["key_sha256"]).strip().lower()
        if not _SHA256.fullmatch(digest):
            raise fail(
                "'key_sha256' must be 64 hex digits (quoted in YAML)",
                'printf %s "$KEY" | sha256sum',
            )
        key = _Key(digest.encode(), True, FULL_ACCESS)
    read = _patterns(entry.get("read"), fail, "read")
    load = _patterns(entry.get("load", []), fail, "load")
    return _Key(key.secret, key.hashed, Access(name.strip(), read, load))


def _patterns(value: object, fail: Any, field: str) -> tuple[str, ...]:
    if value is None:
        raise fail(f"'{field}' is missing: a list of collection names or patterns, or '*'")
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(p, str) and p.strip() for p in items):
        raise fail(f"'{field}' must be a list of collection names or patterns, or '*'")
    return tuple(p.strip() for p in items)
