"""A misspelt key in hive.toml or a task's front matter is named with the key it is
close to, as a misspelt ROM field is."""

from __future__ import annotations

import logging

import pytest

from hivemind.errors import ConfigError
from hivemind.hive.config import load_hive_config
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import Hive


@pytest.mark.parametrize(
    ("text", "said"),
    [
        pytest.param('[agnets]\nmodel = "opus"\n', "line 1: agnets is not a known field "
                     "(did you mean `agents`?)", id="table"),
        pytest.param('[agents]\nmodle = "opus"\n', "line 2: agents.modle is not a known "
                     "field (did you mean `model`?)", id="agents-key"),
        pytest.param("[agents.retrieval]\nalpah = 1\n", "agents.retrieval.alpah is not a "
                     "known field (did you mean `alpha`?)", id="nested-table"),
        pytest.param('[pricing."local"]\ninput = 1\noutput = 1\ncache_write = 1\n'
                     "cache_read = 1\ninptu = 2\n", "pricing.local.inptu is not a known "
                     "field (did you mean `input`?)", id="table-of-a-mapping"),
        pytest.param('[provider]\nbaseurl = "x"\n', "provider.baseurl is not a known field "
                     "(did you mean `base_url`?)", id="provider"),
    ],
)
def test_a_misspelt_hive_toml_key_names_the_key_it_is_close_to(
    hive: Hive, text: str, said: str
) -> None:
    hive.config_file.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_hive_config(hive)
    assert said in str(err.value)


def test_an_unknown_hive_toml_key_close_to_none_gets_no_guess(hive: Hive) -> None:
    hive.config_file.write_text("[daemon]\nzebra = 1\n")
    with pytest.raises(ConfigError) as err:
        load_hive_config(hive)
    assert str(err.value).endswith("daemon.zebra is not a known field")


def test_a_misspelt_task_field_is_named_with_the_field_it_is_close_to(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    path = hive.tasks_dir / "t1.md"
    path.write_text("---\nasignee: bob\n---\nDo it.\n")
    with caplog.at_level(logging.WARNING):
        task = read_task(path)
    assert task.assignee is None  # kept as extra: the task goes to anyone
    assert "unknown field 'asignee' kept as extra (did you mean `assignee`?)" in caplog.text
