# syntax=docker/dockerfile:1
#
# lifecycle-controller image: a virtual environment built from the project's wheel on a slim
# Python base, run as a non-root numeric user on a read-only root filesystem.
#
#   docker build -t lifecycle-controller:dev --build-arg VERSION=0.1.0 .
#
# Stage 1 builds the wheel and installs it (with its dependencies, as binary wheels) into
# /opt/venv; the final stage copies only that venv onto the same base image, so no build
# tool, compiler or pip cache ships. tests/chart/test_image_install.py runs the same steps
# in a fresh venv on every CI run.

ARG PYTHON_IMAGE=python:3.11.14-slim-trixie

FROM ${PYTHON_IMAGE} AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY lifecycle_controller ./lifecycle_controller

# --only-binary: dependencies must come as wheels; nothing is compiled in this image either.
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && python -m venv --without-pip /opt/venv \
    && pip --python /opt/venv/bin/python install --no-cache-dir --only-binary=:all: /wheels/*.whl \
    && /opt/venv/bin/lifecycle-controller version

FROM ${PYTHON_IMAGE}

ARG PYTHON_IMAGE
ARG VERSION=0.1.0
ARG REVISION=""
ARG CREATED=""
ARG SOURCE=""

LABEL org.opencontainers.image.title="lifecycle-controller" \
      org.opencontainers.image.description="Carries out time-based lifecycle.cezary.dev annotations: timed deletes and workload restarts." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"

COPY --from=build /opt/venv /opt/venv

# Nothing is written at run time: no bytecode caches, unbuffered logs, and HOME on the /tmp
# emptyDir the Helm chart mounts (the only writable path under readOnlyRootFilesystem).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp

USER 65532:65532

ENTRYPOINT ["lifecycle-controller", "run"]
