"""The Python SDK: the clients, the producer and the reads they make."""
