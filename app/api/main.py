"""The API's routers, in one place."""

from fastapi import APIRouter

from app.api.routes import dashboard, docs, health, hosts, keys, populations, predictions, targets

api_router = APIRouter()
api_router.include_router(predictions.router)
api_router.include_router(populations.router)
api_router.include_router(targets.router)
api_router.include_router(hosts.router)
api_router.include_router(health.router)
api_router.include_router(dashboard.router)
api_router.include_router(docs.router)
api_router.include_router(keys.router)
