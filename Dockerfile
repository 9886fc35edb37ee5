# harken serve with the bundled default model.
#   CPU (default):  docker build -t harken .
#   CUDA:           docker build -t harken:cuda \
#                     --build-arg BASE_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04 \
#                     --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 \
#                     --build-arg DEVICE=cuda --build-arg DTYPE=fp16 .
#                   docker run --gpus 1 -p 8000:8000 harken:cuda
# Every `harken serve` flag can be set at run time as HARKEN_<FLAG> (e.g. HARKEN_MAX_STREAMS).
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG DEVICE=cpu
ARG DTYPE=auto
ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PATH=/opt/venv/bin:$PATH

# Runtime libraries (libsndfile, ffmpeg for MP3/M4A/WebM) and a compiler for KenLM's Python
# module; a CUDA base image brings no Python, so install one there.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libsndfile1 ffmpeg build-essential \
      zlib1g-dev libbz2-dev liblzma-dev \
 && (command -v python3 >/dev/null || apt-get install -y --no-install-recommends \
      python3 python3-venv python3-dev) \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/venv

WORKDIR /app
# torch first and pinned, from the index that matches the device.
RUN pip install torch==2.13.0 --index-url "${TORCH_INDEX}"
COPY pyproject.toml README.md harken_cli.py ./
COPY scripts/constraints.txt scripts/
COPY models models
COPY decoder decoder
COPY server server
COPY loadtest loadtest
RUN pip install -c scripts/constraints.txt . \
 && apt-get purge -y build-essential && apt-get autoremove -y

# The beam search's numba kernels compile once, here, into a cache the server user can read
# and write; without it every server process would compile them at start-up (seconds).
ENV NUMBA_CACHE_DIR=/app/.numba-cache
RUN useradd --system --home /app harken && mkdir -p /app/.numba-cache \
 && chown harken /app/.numba-cache
USER harken
RUN python3 -c "from decoder.beam import warm_up; warm_up()"
ENV HARKEN_HOST=0.0.0.0 HARKEN_PORT=8000 HARKEN_BUNDLE=/app/models/default \
    HARKEN_DEVICE=${DEVICE} HARKEN_DTYPE=${DTYPE} HARKEN_SHUTDOWN_GRACE_S=20
EXPOSE 8000
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"
CMD ["harken", "serve"]
