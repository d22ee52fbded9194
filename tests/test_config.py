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
