"""memstream: long-term memory for AI agents, event-sourced on Kafka and MongoDB."""

from memstream.client import MemoryClient
from memstream.config import Settings, load_settings
from memstream.sync_client import SyncMemoryClient

__all__ = ["MemoryClient", "Settings", "SyncMemoryClient", "load_settings"]
__version__ = "0.1.0"
