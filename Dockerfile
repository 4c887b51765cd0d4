# syntax=docker/dockerfile:1
# The image the Helm chart deploys (ghcr.io/ragwatch/ragwatch:<appVersion>): `ragwatch` as entrypoint, so
# the chart's `args: [worker]` / `[replay, ...]` pick the command. Build, from the repository root:
#   docker build -t ghcr.io/ragwatch/ragwatch:0.1.0 .
#   docker build --build-arg EXTRAS=serve,embeddings -t ragwatch:embeddings .   (or serve,semantic)
# It runs as uid/gid 10001 (the chart's podSecurityContext) on a read-only root filesystem: nothing is
# written at run time but under /tmp (an emptyDir in the chart), bytecode is compiled at build time.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
RUN pip install --no-cache-dir build==1.2.2.post1
COPY pyproject.toml README.md ./
COPY ragwatch ./ragwatch
COPY packages ./packages
# the semantic tier's tensors are a wheel of their own; the extras that need them find it with --find-links
RUN python -m build --wheel --outdir /dist \
    && python -m build --wheel --outdir /dist packages/ragwatch-semantic-model

FROM ${PYTHON_IMAGE}
# Optional extras of the wheel, comma-separated (e.g. "serve,embeddings"); empty for the core install.
ARG EXTRAS=serve
LABEL org.opencontainers.image.title="ragwatch" \
      org.opencontainers.image.source="https://github.com/ragwatch/ragwatch" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    TMPDIR=/tmp \
    PATH=/opt/ragwatch/bin:$PATH
RUN groupadd --system --gid 10001 ragwatch \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin ragwatch
COPY --from=build /dist/ /tmp/dist/
RUN python -m venv /opt/ragwatch \
    && set -- /tmp/dist/ragwatch-*.whl && wheel="$1" \
    && if [ -n "${EXTRAS}" ]; then spec="ragwatch[${EXTRAS}] @ file://${wheel}"; else spec="${wheel}"; fi \
    && /opt/ragwatch/bin/pip install --no-cache-dir --find-links /tmp/dist "${spec}" \
    && rm -rf /tmp/dist \
    && /opt/ragwatch/bin/python -m compileall -q /opt/ragwatch
USER 10001:10001
WORKDIR /tmp
EXPOSE 9465
ENTRYPOINT ["ragwatch"]
CMD ["--help"]
