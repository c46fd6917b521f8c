"""memstream: long-term memory for AI agents, event-sourced on Kafka and MongoDB."""

from memstream.client import MemoryClient
from memstream.config import Settings, load_settings

__all__ = ["MemoryClient", "Settings", "load_settings"]
__version__ = "0.1.0"
