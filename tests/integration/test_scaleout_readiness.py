"""A scale-out gateway is ready only once it has heard of every table it serves.

It serves HTTP, and answered 200 on ``/readyz``, before the first step of its tables
reached it over the bus: a load balancer sent it players whose hello for a real table was
closed 4004 (unknown table). Seen in a loaded run of the cluster test; now ``/readyz``
names the tables still unknown (``tables_unknown``) and says not ready until there are none.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from deployment import Deployment, wait_for
from liveserver import TABLE
from redis_util import RedisServer

pytestmark = [pytest.mark.redis]


async def test_a_gateway_is_not_ready_before_it_knows_its_tables(
        tmp_path: Path, redis_server: RedisServer) -> None:
    deployment = Deployment(tmp_path, redis_server, engines=1, gateways=1)
    [engine], [gateway] = deployment.engines, deployment.gateways
    try:
        gateway.launch()  # no engine yet: nothing has told the gateway of table t1
        body = await wait_for(lambda: deployment.readyz(gateway), 20, "the gateway answering")
        assert body["ready"] is False, body
        assert body["checks"]["tables_unknown"] == [TABLE], body
        assert body["checks"]["store"] is True and body["checks"]["bus"] is True, body
        response = await deployment.http.get(gateway.http + "/readyz")
        assert response.status_code == 503
        engine.start()
        ready = await deployment.wait_gateway_ready(gateway)
        assert "tables_unknown" not in ready["checks"], ready
    finally:
        await deployment.close()
