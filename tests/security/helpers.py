"""Small helpers the security tests share."""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlparse

from tests.service.helpers import WORKLOAD

HEAVY = {"model": "mvitv2_huge_cls", "mode": "train", "batch_size": 64, "precision": "amp-fp16"}


def body(targets: list[Any] | None = None, **workload: Any) -> dict[str, Any]:
    return {"workload": {**WORKLOAD, **workload}, "targets": targets or ["rtx-3090"], "estimator": "analytic"}


def raw_http(url: str, head: bytes, chunks: list[bytes], timeout_s: float = 10.0) -> tuple[int, int]:
    """Send a request's head and then its chunks on a raw socket, stopping as soon as the server answers. Returns
    the answer's status and how many of the chunks had been sent when it came."""
    parsed = urlparse(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=timeout_s) as connection:
        connection.sendall(head)
        sent = 0
        connection.setblocking(False)
        answer = b""
        for chunk in chunks:
            try:
                answer += connection.recv(65536)
            except BlockingIOError:
                pass
            if answer:
                break
            try:
                connection.setblocking(True)
                connection.sendall(chunk)
                connection.setblocking(False)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 1
        connection.setblocking(True)
        connection.settimeout(timeout_s)
        while b"\r\n" not in answer:
            more = connection.recv(65536)
            if not more:
                break
            answer += more
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return status, sent
