"""Agent² RL-Bench: benchmark LLM agents that engineer post-training of another model."""

__version__ = "0.1.0"
