"""hivemind: a team of LLM agents whose shared memory is an ordinary directory tree."""

__version__ = "0.1.0"
