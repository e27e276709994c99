"""The workers' hosts, as their heartbeats describe them."""

from __future__ import annotations

from fastapi import APIRouter
from redis.exceptions import RedisError

from app import crud
from app.api.deps import ReadKeyDep, RedisDep, SessionDep, SettingsDep
from app.schemas import HostsPublic, host_public
from ledger.queues import CPU_QUEUE

router = APIRouter(prefix="/v1/hosts", tags=["hosts"])


@router.get("", response_model=HostsPublic)
def read_hosts(session: SessionDep, redis: RedisDep, settings: SettingsDep, caller: ReadKeyDep) -> HostsPublic:
    """Each worker's GPU, fingerprint, last heartbeat and queue depth. Only an admin key sees how to reach a worker
    (its process id, lock and worker token)."""
    hosts = crud.list_hosts(session=session)
    names = sorted({host.host_class for host in hosts} | {CPU_QUEUE})
    try:
        depths: dict[str, int] | None = crud.queue_depths(redis, names)
    except RedisError:
        depths = None  # the hosts are still worth showing
    now = crud.db_now(session=session)
    data = []
    for host in hosts:
        served = (host.info or {}).get("queues") or [host.host_class]
        queues = {name: depths.get(name, 0) for name in served} if depths is not None else None
        data.append(host_public(host, crud.host_is_alive(host, settings, now), queues,
                                internals=caller is not None and caller.admin))
    return HostsPublic(data=data, count=len(data))
