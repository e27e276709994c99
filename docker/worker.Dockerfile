# The worker image: one worker per GPU (`understudy worker --gpu N`), with torch built for one CUDA version, chosen
# at build time. The NVIDIA container toolkit brings the driver in, nvidia-cuda-mps-control included (the `compute`
# capability); the worker refuses to start, saying why, when the driver is too old for the build.
#
#   TORCH_CUDA   torch build                    NVIDIA driver on the host
#   cu130        CUDA 13.0 (the default)        >= 580.65.06
#   cu128        CUDA 12.8                      >= 570.26 (>= 525.60.13 through CUDA 12 minor-version compatibility)
#   cu126        CUDA 12.6                      >= 560.28.03 (likewise >= 525.60.13)
#   cpu          no CUDA                        none: the worker serves only `analytic`
#
# Built from the repository root: docker build -f docker/worker.Dockerfile --build-arg TORCH_CUDA=cu128 \
#   -t understudy-worker:cu128 .
FROM python:3.11-slim-bookworm

ARG TORCH_VERSION=2.14.1
ARG TORCHVISION_VERSION=0.29.1
ARG TORCH_CUDA=cu130
# The timm the shipped count table was made with (engine/data/count-table.zip; scripts/install.sh says the same).
ARG TIMM_VERSION=1.0.31
# PyTorch's index for the chosen build (a local mirror works as well).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/${TORCH_CUDA}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    UNDERSTUDY_RUN_DIR=/tmp/understudy \
    CUDA_CACHE_PATH=/var/cache/understudy/cuda

# timm needs torchvision, whose wheels only load beside the torch build they were made for: the pair first.
RUN pip install --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}" "torchvision==${TORCHVISION_VERSION}" \
    && pip install "timm==${TIMM_VERSION}"

WORKDIR /srv/understudy
COPY pyproject.toml README.md ./
RUN mkdir -p understudy ledger engine client evaluation app worker cli \
    && for package in understudy ledger engine client evaluation app worker cli; do touch "$package/__init__.py"; done \
    && pip install -e ".[worker]" && rm -rf understudy ledger engine client evaluation app worker cli
COPY understudy understudy
COPY ledger ledger
COPY engine engine
COPY client client
COPY evaluation evaluation
COPY app app
COPY worker worker
COPY cli cli
COPY migrations migrations
COPY alembic.ini ./
# The driver's compute cache: code the GPU's libraries compile at run time (cuDNN's, for depthwise convolutions).
# Kept on a volume (docker-compose.yml), a worker that starts again finds it and warms up in half the time
# (benchmarks/cli/README.md); the directory belongs to the worker's user, and a new volume takes it from the image.
RUN pip install --no-deps -e . && useradd --create-home --uid 10001 understudy \
    && mkdir -p /var/cache/understudy/cuda && chown -R 10001 /var/cache/understudy
USER 10001

# The worker's health: its hosts row is fresh and it holds its GPU's lock (UNDERSTUDY_WORKER_GPU names the GPU).
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 CMD ["understudy", "worker", "--check"]
# SIGTERM lets the current job finish (rq's warm shutdown); give the container time for it (stop_grace_period).
STOPSIGNAL SIGTERM
CMD ["understudy", "worker"]
