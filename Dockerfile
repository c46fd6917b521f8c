# The memstream worker image used by docker-compose.kafka.yml (Kafka and MongoDB are external).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY events events
COPY handlers handlers
COPY streams streams
COPY projections projections
COPY memstream memstream
RUN pip install --no-cache-dir '.[embeddings]'
ENV MEMSTREAM_DATA_DIR=/var/lib/memstream
CMD ["memstream", "up"]
