"""Where settings come from, and how their errors name the source.

Precedence, lowest first: built-in defaults < config file < environment
``DEEPSEARCHER_<SECTION>__<KEY>`` < explicit overrides (CLI flags, library keyword arguments).
The config file is ``--config``/``path``, else ``$DEEPSEARCHER_CONFIG``, else ``./config.yaml``
when it exists. Unknown keys and wrong types are errors naming the key and where it came from.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

import yaml
from pydantic import BaseModel, ValidationError

from deepsearcher.config.schema import Settings
from deepsearcher.errors import ConfigError

logger = logging.getLogger(__name__)

ENV_PREFIX = "DEEPSEARCHER_"
# DEEPSEARCHER_* variables that are not settings (so a typo check must not flag them).
OTHER_ENV_VARS = frozenset({"DEEPSEARCHER_CONFIG", "DEEPSEARCHER_API_KEYS"})


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _parse_env_value(raw: str) -> Any:
    # JSON lets lists and numbers through unchanged; anything else stays a string for pydantic.
    text = raw.strip()
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return raw
    return raw


class _Origin(NamedTuple):
    """Where a setting's value came from, for error messages."""

    kind: Literal["file", "env", "option", "argument"]
    name: str  # the file path, the variable name or the option name

    def phrase(self) -> str:
        return {
            "file": f"in {self.name}",
            "env": f"from environment variable {self.name}",
            "option": f"from option {self.name}",
            "argument": "from the arguments",
        }[self.kind]


def _env_layer(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, _Origin]]:
    layer: dict[str, Any] = {}
    origin: dict[str, _Origin] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX) :].lower().partition("__")
        layer.setdefault(section, {})[key] = _parse_env_value(raw)
        origin[f"{section}.{key}"] = _Origin("env", name)
    return layer, origin


def _env_name(dotted: str) -> str:
    section, _, key = dotted.partition(".")
    return f"{ENV_PREFIX}{section.upper()}__{key.upper()}"


def _setting_keys() -> list[str]:
    """Every setting as ``section.key``."""
    keys: list[str] = []
    for section, field in Settings.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            keys.extend(f"{section}.{key}" for key in model.model_fields)
    return keys


def _warn_unmatched_env(environ: Mapping[str, str], settings: Settings) -> None:
    """Warn about DEEPSEARCHER_* variables that set nothing: without the double underscore a
    variable would be ignored in silence. Names only: a value may be a secret."""
    named_by_settings = set()  # e.g. llm.api_key_env may name DEEPSEARCHER_OPENAI_KEY
    for key in _setting_keys():
        section, _, field = key.partition(".")
        if field.endswith("_env"):
            named_by_settings.add(getattr(getattr(settings, section), field))
    flat = {key.replace(".", "_"): key for key in _setting_keys()}
    for name in sorted(environ):
        if (
            not name.startswith(ENV_PREFIX)
            or "__" in name  # section and key given: an unknown one fails validation instead
            or name in OTHER_ENV_VARS
            or name in named_by_settings
        ):
            continue
        close = difflib.get_close_matches(name[len(ENV_PREFIX) :].lower(), flat, n=1)
        if close:
            logger.warning(
                "environment variable %s matches no setting and is ignored; did you mean %s?",
                name,
                _env_name(flat[close[0]]),
            )
        else:
            logger.warning(
                "environment variable %s matches no setting and is ignored; settings are "
                "%s<SECTION>__<KEY> (two underscores), e.g. %s",
                name,
                ENV_PREFIX,
                _env_name("query.top_k"),
            )


def _resolve_config_path(path: str | os.PathLike[str] | None) -> Path | None:
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}", "pass an existing file to --config")
        return p
    env_path = os.environ.get("DEEPSEARCHER_CONFIG")
    if env_path:
        p = Path(env_path)
        if not p.is_file():
            raise ConfigError(
                f"config file not found: {p} (from DEEPSEARCHER_CONFIG)",
                "point DEEPSEARCHER_CONFIG at an existing file or unset it",
            )
        return p
    default = Path("config.yaml")
    return default if default.is_file() else None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"{path}: not valid YAML ({exc.__class__.__name__})", "fix the YAML syntax"
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of sections", "see config.yaml")
    return data


def load_settings(
    path: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    override_options: Mapping[str, str] | None = None,
) -> Settings:
    """Build Settings from defaults, the config file, the environment and ``overrides``.

    ``overrides`` is nested (``{"llm": {"model": "x"}}``); ``None`` values are ignored so CLI
    options that were not given do not mask lower layers. ``override_options`` names the CLI
    option behind an override (``{"query.agent": "--agent"}``) so an error can point at it.
    A ``DEEPSEARCHER_*`` variable that matches no setting is logged as a warning.
    """
    environ = os.environ if environ is None else environ
    cfg_path = _resolve_config_path(path)
    file_layer = _read_yaml(cfg_path) if cfg_path else {}
    env_layer, env_origin = _env_layer(environ)
    origin = {key: _Origin("file", str(cfg_path)) for key in _dotted_keys(file_layer)}
    origin.update(env_origin)
    merged = _deep_merge(file_layer, env_layer)
    if overrides:
        given = _drop_none(overrides)
        options = override_options or {}
        for key in _dotted_keys(given):
            origin[key] = (
                _Origin("option", options[key]) if key in options else _Origin("argument", "")
            )
        merged = _deep_merge(merged, given)
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        raise _config_error(exc, origin) from None
    settings.config_path = str(cfg_path) if cfg_path else None
    _warn_unmatched_env(environ, settings)
    return settings


def _drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            inner = _drop_none(v)
            if inner:
                out[k] = inner
        elif v is not None:
            out[k] = v
    return out


def _dotted_keys(layer: Mapping[str, Any]) -> list[str]:
    """``{"llm": {"model": "x"}, "foo": 1}`` -> ``["llm.model", "foo"]``: sections, then keys."""
    keys: list[str] = []
    for section, value in layer.items():
        if isinstance(value, Mapping) and value:
            keys.extend(f"{section}.{key}" for key in value)
        else:
            keys.append(str(section))
    return keys


def _source_of(key: str, origin: Mapping[str, _Origin]) -> _Origin | None:
    """Where the value at pydantic's error location ``key`` came from."""
    parts = key.split(".")
    for n in range(len(parts), 0, -1):  # an error in a list item names the setting's item
        found = origin.get(".".join(parts[:n]))
        if found:
            return found
    # An unknown section is reported at the section; its keys carry the source.
    return next((v for k, v in origin.items() if k.startswith(key + ".")), None)


def _config_error(exc: ValidationError, origin: Mapping[str, _Origin]) -> ConfigError:
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"])
    source = _source_of(key, origin)
    where = f" {source.phrase()}" if source else ""
    if err["type"] == "extra_forbidden":
        msg = f"unknown setting '{key}'{where}"
        hint = _unknown_hint(key, source)
    else:
        # pydantic's message states what was expected, never the value (which may be a secret).
        # A registry's check raises ValueError; pydantic's "Value error, " prefix says nothing.
        msg = f"invalid setting '{key}'{where}: {err['msg'].removeprefix('Value error, ')}"
        if source and source.kind == "option":
            hint = f"see --help for what {source.name} accepts"
        elif source and source.kind == "env":
            hint = f"fix or unset {source.name}; config.yaml documents each setting and its type"
        else:
            hint = "config.yaml documents each setting and its type"
    more = len(exc.errors()) - 1
    if more:
        msg += f" (and {more} more)"
    return ConfigError(msg, hint)


def _unknown_hint(key: str, source: _Origin | None) -> str:
    candidates = _setting_keys() if "." in key else [*Settings.model_fields]
    close = difflib.get_close_matches(key, candidates, n=1)
    if close and close[0] == f"{key}_env":  # llm.api_key: the key itself, not its variable
        section, _, field = close[0].partition(".")
        default = getattr(getattr(Settings(), section), field)
        return (
            f"secrets are not settings: put it in the variable {close[0]} names "
            f"({default} by default)"
            + (f" and unset {source.name}" if source and source.kind == "env" else "")
        )
    if source and source.kind == "env":
        if close and "." in close[0]:
            return f"did you mean {_env_name(close[0])}? If not, unset {source.name}"
        return (
            f"unset {source.name}; settings are {ENV_PREFIX}<SECTION>__<KEY>, "
            "with the sections and keys of config.yaml"
        )
    if close:
        return f"did you mean '{close[0]}'? config.yaml lists every setting"
    return "remove it or fix its spelling; config.yaml lists every setting"


_CONFIG_HEADER = """\
# deepsearcher configuration. Every setting is listed with its default.
# Precedence (lowest first): built-in defaults < this file (--config, $DEEPSEARCHER_CONFIG,
#   or ./config.yaml) < environment DEEPSEARCHER_<SECTION>__<KEY> (e.g.
#   DEEPSEARCHER_LLM__MODEL=gpt-4o) < CLI flags.
# Secrets never go here: *_env settings name the environment variable that holds them.
"""


def render_config_yaml(settings: Settings) -> str:
    """YAML of every setting with its description as a comment (``deepsearcher config``)."""
    lines = [_CONFIG_HEADER]
    for name in Settings.model_fields:
        if name == "config_path":
            continue
        section = getattr(settings, name)
        lines.append(f"{name}:")
        for key, field in type(section).model_fields.items():
            if field.description:
                lines.append(f"  # {field.description}")
            value = json.dumps(getattr(section, key), ensure_ascii=False)
            lines.append(f"  {key}: {value}")
        lines.append("")
    return "\n".join(lines)
