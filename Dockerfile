# One image for the API and the worker. The API never imports torch; the worker needs it (and, for the GPU
# estimators, the NVIDIA container toolkit on the host: `deploy.resources.reservations.devices` in compose).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# timm needs torchvision, whose wheels only load beside the torch build they were made for: install the pair first
# (PIP_INDEX_URL / PIP_EXTRA_INDEX_URL pick a CUDA build or a local mirror at build time).
ARG TORCH_VERSION=2.14.1
ARG TORCHVISION_VERSION=0.29.1
RUN pip install "torch==${TORCH_VERSION}" "torchvision==${TORCHVISION_VERSION}"

WORKDIR /srv/understudy
# Dependencies first, so a code change does not reinstall them.
COPY pyproject.toml ./
RUN mkdir -p understudy ledger engine client evaluation app worker cli \
    && for p in understudy ledger engine client evaluation app worker cli; do touch $p/__init__.py; done && touch README.md \
    && pip install -e . && rm -rf understudy ledger engine client evaluation app worker cli README.md
COPY understudy understudy
COPY ledger ledger
COPY engine engine
COPY client client
COPY evaluation evaluation
COPY cli cli
COPY app app
COPY worker worker
COPY migrations migrations
COPY alembic.ini README.md* ./
RUN ([ -f README.md ] || touch README.md) && pip install --no-deps -e . \
    && useradd --create-home --uid 10001 understudy
USER understudy

EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=4)"
# The API by default; the worker service overrides the command (see docker-compose.yml).
CMD ["understudy", "serve", "--host", "0.0.0.0", "--port", "8000", "--migrate"]
