"""python -m gateway --port P … (secrets in DEVSTACK_* environment variables)."""
from __future__ import annotations

import logging

from aiohttp import web

from .app import AccessLogger, build_app
from .settings import parse


def main() -> None:
    settings = parse()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("gateway").info("start %r", settings)
    web.run_app(build_app(settings), host=settings.host, port=settings.port,
                access_log_class=AccessLogger, print=None, shutdown_timeout=0.5)


if __name__ == "__main__":
    main()
