# The memstream image docker-compose.kafka.yml runs each stage worker and the HTTP API from
# (Kafka and MongoDB are external).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY events events
COPY handlers handlers
COPY streams streams
COPY projections projections
COPY memstream memstream
RUN pip install --no-cache-dir '.[embeddings,server]'
ENV MEMSTREAM_DATA_DIR=/var/lib/memstream
CMD ["memstream", "up"]
