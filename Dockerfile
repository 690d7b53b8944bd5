# kipling broker image.
#
#   docker build -t kipling .
#   docker run --rm -p 9092:9092 -p 9404:9404 -v kipling-data:/var/lib/kipling kipling
#
# Without a mounted config it runs a single-node broker (its own controller) advertised as
# localhost:9092. docker-compose.yml runs three of these with config/cluster/broker-N.properties
# mounted at /etc/kipling/server.properties. Extra broker arguments go after the image name:
#   docker run kipling --config /etc/kipling/server.properties --override num.partitions=6

ARG PYTHON_IMAGE=python:3.11-slim

# ---- build: install kipling and its dependencies into a virtualenv (wheels only, no compiler) ----
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/kipling
ENV PATH=/opt/kipling/bin:$PATH
WORKDIR /src
COPY . .
RUN pip install --no-cache-dir .

# ---- runtime: the virtualenv, a default config and an unprivileged user; no sources, no pip cache ----
FROM ${PYTHON_IMAGE}

LABEL org.opencontainers.image.title="kipling" \
      org.opencontainers.image.description="A Kafka-compatible, replicated log broker in Python (asyncio + uvloop)" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"

ARG KIPLING_UID=10001
RUN groupadd --system --gid ${KIPLING_UID} kipling \
 && useradd --system --uid ${KIPLING_UID} --gid kipling --home-dir /var/lib/kipling --no-create-home \
      --shell /usr/sbin/nologin kipling \
 && mkdir -p /var/lib/kipling /etc/kipling \
 && chown kipling:kipling /var/lib/kipling

# The default configuration: a single node that is its own controller, reachable from the host.
RUN printf '%s\n' \
      '# Default for "docker run kipling": one node, its own controller. docker-compose.yml mounts' \
      '# config/cluster/broker-N.properties here instead.' \
      'node.id=1' \
      'process.roles=broker,controller' \
      'controller.listener.names=CONTROLLER' \
      'listeners=PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093' \
      'advertised.listeners=PLAINTEXT://localhost:9092' \
      'metrics.listener=0.0.0.0:9404' \
      'log.dirs=/var/lib/kipling/data' \
      > /etc/kipling/server.properties

COPY --from=build /opt/kipling /opt/kipling
ENV PATH=/opt/kipling/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

# Numeric, so that runtimes that check for a non-root user (runAsNonRoot) can tell.
USER ${KIPLING_UID}:${KIPLING_UID}
WORKDIR /var/lib/kipling
VOLUME ["/var/lib/kipling"]

# 9092: client listener; 9093: controller listener (the controller node); 9404: Prometheus /metrics.
EXPOSE 9092 9093 9404

# Healthy when the broker answers an ApiVersions v0 request on 9092 with error code 0
# (request: api key 18, version 0, correlation id 1, null client id; response: size, correlation id,
# error code).
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import socket,struct; s=socket.create_connection(('127.0.0.1',9092),3); s.sendall(struct.pack('>ihhih',10,18,0,1,-1)); r=s.makefile('rb').read(10); assert struct.unpack('>iih',r)[1:]==(1,0)"]

ENTRYPOINT ["kipling", "broker"]
CMD ["--config", "/etc/kipling/server.properties"]
