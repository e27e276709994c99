# The API image: FastAPI under uvicorn, Alembic and the service's commands (`understudy serve`, `keys`). No torch,
# no CUDA: the API never measures, and the project's base dependencies leave the worker's out (pyproject.toml,
# `worker` extra). Built from the repository root: docker build -f docker/api.Dockerfile -t understudy-api .
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv/understudy
# Dependencies first, so a code change does not reinstall them (placeholders stand in for the packages).
COPY pyproject.toml README.md ./
RUN mkdir -p understudy ledger client app cli \
    && for package in understudy ledger client app cli; do touch "$package/__init__.py"; done \
    && pip install -e . && rm -rf understudy ledger client app cli
# The layers the API and the service's commands import (not engine/, worker/, evaluation/: they need torch).
COPY understudy understudy
COPY ledger ledger
COPY client client
COPY app app
COPY cli cli
COPY migrations migrations
COPY alembic.ini ./
# Editable, so that the commands find alembic.ini and migrations/ beside the code.
RUN pip install --no-deps -e . && useradd --create-home --uid 10001 understudy
USER 10001

EXPOSE 8000
# The API's health: 200 while Postgres and Redis answer.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=4)"]
CMD ["understudy", "serve", "--host", "0.0.0.0", "--port", "8000", "--migrate"]
