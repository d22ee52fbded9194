from __future__ import annotations

from pathlib import Path

import pytest

from deepsearcher.config import Settings, load_settings, render_config_yaml
from deepsearcher.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def test_repo_config_yaml_documents_every_default() -> None:
    # config.yaml must stay true to the code: it is exactly the rendered defaults.
    assert (REPO / "config.yaml").read_text(encoding="utf-8") == render_config_yaml(Settings())
    assert load_settings(REPO / "config.yaml", environ={}).model_dump() == Settings().model_dump()


def test_precedence_defaults_file_env_overrides(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("llm:\n  model: from-file\n  max_retries: 5\nquery:\n  top_k: 7\n")
    env = {"DEEPSEARCHER_LLM__MODEL": "from-env", "DEEPSEARCHER_QUERY__MAX_ITER": "2"}
    s = load_settings(cfg, overrides={"query": {"top_k": 9, "max_iter": None}}, environ=env)
    assert s.llm.model == "from-env"  # env beats file
    assert s.llm.max_retries == 5  # file beats default
    assert s.query.top_k == 9  # override beats file
    assert s.query.max_iter == 2  # a None override does not mask env
    assert s.llm.temperature == 0.0  # default
    assert s.config_path == str(cfg)


def test_env_lists_parse_as_json(tmp_path: Path) -> None:
    s = load_settings(environ={"DEEPSEARCHER_LOADING__EXCLUDE": '["*.tmp", "drafts/*"]'})
    assert s.loading.exclude == ["*.tmp", "drafts/*"]


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("llm:\n  modle: x\n")
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, environ={})
    assert "llm.modle" in err.value.message and str(cfg) in err.value.message
    assert err.value.hint


def test_wrong_type_from_env_names_variable() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(environ={"DEEPSEARCHER_LLM__TIMEOUT_S": "soon"})
    assert "DEEPSEARCHER_LLM__TIMEOUT_S" in err.value.message


def test_config_from_env_var_path_and_missing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "x.yaml"
    cfg.write_text("query:\n  max_iter: 4\n")
    monkeypatch.setenv("DEEPSEARCHER_CONFIG", str(cfg))
    assert load_settings().query.max_iter == 4
    monkeypatch.setenv("DEEPSEARCHER_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match="not found"):
        load_settings()


def test_invalid_yaml_is_a_config_error(tmp_path: Path) -> None:
    cfg = tmp_path / "broken.yaml"
    cfg.write_text("llm: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(cfg, environ={})


def test_llm_configured_needs_key_or_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert not Settings().llm_configured()
    assert load_settings(
        environ={"DEEPSEARCHER_LLM__BASE_URL": "http://127.0.0.1:1/v1"}
    ).llm_configured()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert Settings().llm_configured()


# -- errors and warnings name where a value came from (issue #12, item 13) -------------------


def test_option_error_names_the_option_not_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("query:\n  top_k: 4\n")
    with pytest.raises(ConfigError) as err:
        load_settings(
            cfg,
            overrides={"query": {"agent": "bogus"}},
            environ={},
            override_options={"query.agent": "--agent"},
        )
    assert err.value.message.startswith("invalid setting 'query.agent' from option --agent: ")
    assert str(cfg) not in err.value.message and "--agent" in err.value.hint


def test_unknown_section_from_env_names_the_variable(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("llm:\n  model: x\n")
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, environ={"DEEPSEARCHER_FOO__BAR": "5"})
    assert err.value.message == (
        "unknown setting 'foo' from environment variable DEEPSEARCHER_FOO__BAR"
    )
    assert "DEEPSEARCHER_FOO__BAR" in err.value.hint


def test_unknown_key_in_file_suggests_the_setting(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("query:\n  topk: 3\n")
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, environ={})
    assert err.value.message == f"unknown setting 'query.topk' in {cfg}"
    assert "query.top_k" in err.value.hint


def test_invalid_list_item_names_the_variable() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(environ={"DEEPSEARCHER_LOADING__EXCLUDE": "[1]"})
    assert "from environment variable DEEPSEARCHER_LOADING__EXCLUDE" in err.value.message


def test_misspelt_env_variable_warns_with_the_right_spelling(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="deepsearcher.config"):
        s = load_settings(environ={"DEEPSEARCHER_QUERY_TOP_K": "5", "DEEPSEARCHER_CONFIG": ""})
    assert s.query.top_k == Settings().query.top_k
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "DEEPSEARCHER_QUERY_TOP_K matches no setting" in warning
    assert "did you mean DEEPSEARCHER_QUERY__TOP_K?" in warning


def test_no_warning_for_known_or_named_variables(caplog: pytest.LogCaptureFixture) -> None:
    environ = {
        "DEEPSEARCHER_API_KEYS": "team-key",
        "DEEPSEARCHER_LLM__API_KEY_ENV": "DEEPSEARCHER_OPENAI_KEY",
        "DEEPSEARCHER_OPENAI_KEY": "sk-named-by-a-setting",
    }
    with caplog.at_level("WARNING", logger="deepsearcher.config"):
        load_settings(environ=environ)
    assert caplog.records == []


def test_secret_values_are_never_echoed(caplog: pytest.LogCaptureFixture) -> None:
    secret = "sk-do-not-print-0123456789"
    with pytest.raises(ConfigError) as err:
        load_settings(environ={"DEEPSEARCHER_LLM__API_KEY": secret})
    assert "llm.api_key" in err.value.message
    assert "OPENAI_API_KEY" in err.value.hint  # where the key goes instead
    with pytest.raises(ConfigError) as err2:
        load_settings(environ={"DEEPSEARCHER_LLM__TIMEOUT_S": secret})
    with caplog.at_level("WARNING", logger="deepsearcher.config"):
        load_settings(environ={"DEEPSEARCHER_OPENAI_API_KEY": secret})
    said = [err.value.message, err.value.hint, err2.value.message, err2.value.hint]
    said += [r.getMessage() for r in caplog.records]
    assert len(said) == 5 and not any(secret in text for text in said)


# -- the registries are the one list of provider names --------------------------------------


def test_every_registered_name_resolves_to_its_factory() -> None:
    from deepsearcher.config import registry

    for reg in (
        registry.EMBEDDERS,
        registry.CHAT_MODELS,
        registry.STORES,
        registry.AGENTS,
        registry.WEB_SEARCH_PROVIDERS,
    ):
        for name in reg:
            assert callable(reg[name]), f"{reg.setting} {name}"


def test_unregistered_provider_is_an_error_listing_the_registered_names() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(
            environ={"DEEPSEARCHER_WEB_SEARCH__PROVIDER": "bing", "DEEPSEARCHER_CONFIG": ""}
        )
    assert err.value.message == (
        "invalid setting 'web_search.provider' from environment variable "
        "DEEPSEARCHER_WEB_SEARCH__PROVIDER: must be one of: tavily, searxng, duckduckgo"
    )
    assert "bing" not in err.value.message


def test_a_registered_provider_is_accepted_without_touching_the_schema() -> None:
    from deepsearcher.config import registry

    extra = registry.Registry("web_search.provider", {"bing": "tests.test_config:Settings"})
    assert extra.check("bing") == "bing"
    with pytest.raises(ValueError, match="must be one of: bing"):
        extra.check("tavily")
