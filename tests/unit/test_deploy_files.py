"""The deployment files keep their trust boundaries.

What was wrong before: compose and Kubernetes set ``FORWARDED_ALLOW_IPS: "*"`` (any client
could claim any address with X-Forwarded-For and dodge the per-address limits), nginx
passed a client's own X-Forwarded-For on, and every Redis URL was password-less. These
checks read the files as compose, kustomize and nginx would; the Redis rules themselves are
exercised against a real server in tests/integration/test_deploy_redis_acl.py.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "kubernetes"


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    return data


def k8s(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def livetable_services(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in data["services"].items()
            if svc.get("command", [""])[0] == "livetable"}


def test_nothing_trusts_every_forwarded_for() -> None:
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert "FORWARDED_ALLOW_IPS" not in text, path
            assert not re.search(r"TRUSTED_PROXIES\W+\*", text), path


def test_compose_trusts_nginx_at_its_fixed_address_only() -> None:
    data = compose()
    subnet = ipaddress.ip_network(
        data["networks"]["default"]["ipam"]["config"][0]["subnet"])
    nginx_address = ipaddress.ip_address(
        data["services"]["nginx"]["networks"]["default"]["ipv4_address"])
    assert nginx_address in subnet
    services = livetable_services(data)
    assert {"engine1", "engine2", "gateway1", "gateway2"} <= set(services)
    for name, svc in services.items():
        env = svc["environment"]
        trusted = [ipaddress.ip_network(a.strip(), strict=False)
                   for a in str(env["LIVETABLE_TRUSTED_PROXIES"]).split(",")]
        assert trusted == [ipaddress.ip_network(nginx_address)], name
        # only nginx's address is named, and nothing else on the network may share it
        assert "networks" not in svc or "ipv4_address" not in str(svc["networks"]), name


def test_compose_reaches_redis_as_the_livetable_user_with_a_required_password() -> None:
    data = compose()
    for name, svc in livetable_services(data).items():
        assert svc["environment"]["LIVETABLE_REDIS_URL"].startswith(
            "redis://livetable:${LIVETABLE_REDIS_PASSWORD:?"), name
        assert "--redis" not in svc["command"], name  # the URL stays out of ps
    redis = data["services"]["redis"]
    assert redis["environment"]["LIVETABLE_REDIS_PASSWORD"].startswith(
        "${LIVETABLE_REDIS_PASSWORD:?")
    script = " ".join(redis["command"])
    assert "redis-acl.sh" in script and "users.acl.template" in script
    mounts = {v.split(":")[1] for v in redis["volumes"]}
    assert {"/usr/local/etc/redis/users.acl.template",
            "/usr/local/etc/redis/redis-acl.sh"} <= mounts
    assert any(t.startswith("/run/redis") for t in redis["tmpfs"])
    assert "--user livetable" in " ".join(redis["healthcheck"]["test"])
    assert "ports" not in redis  # never published


def test_every_redis_url_in_deploy_names_the_livetable_user() -> None:
    for path in DEPLOY.rglob("*"):
        if not path.is_file():
            continue
        for url in re.findall(r"rediss?://[^\s\"']+", path.read_text(errors="replace")):
            assert url.startswith(("redis://livetable:", "rediss://livetable:")), (path, url)


def test_kubernetes_trusts_a_network_and_keeps_the_redis_url_secret() -> None:
    (config,) = k8s("configmap.yaml")
    data = config["data"]
    assert "LIVETABLE_REDIS_URL" not in data
    for entry in data["LIVETABLE_TRUSTED_PROXIES"].split(","):
        ipaddress.ip_network(entry.strip(), strict=False)  # an address or network, no "*"
    secrets = {d["metadata"]["name"]: d["stringData"] for d in k8s("secret.example.yaml")}
    assert secrets["livetable"]["LIVETABLE_REDIS_URL"].startswith("redis://livetable:")
    assert "LIVETABLE_REDIS_PASSWORD" in secrets["livetable-redis"]
    # the operators' admin password is never handed to livetable's pods
    assert not any("ADMIN" in key for key in secrets["livetable"])


def test_kubernetes_redis_authenticates_from_the_secret() -> None:
    (sts,) = [d for d in k8s("redis.yaml") if d["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert "redis-acl.sh" in " ".join(container["args"])
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert env["LIVETABLE_REDIS_PASSWORD"] == {"name": "livetable-redis",
                                               "key": "LIVETABLE_REDIS_PASSWORD"}
    assert env["REDISCLI_AUTH"]["key"] == "LIVETABLE_REDIS_PASSWORD"
    probe = " ".join(container["readinessProbe"]["exec"]["command"])
    assert "--user livetable" in probe


def test_the_network_policies_are_applied_and_close_each_port() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert "networkpolicy.yaml" in kustomization["resources"]
    policies = {d["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"]: d["spec"]
                for d in k8s("networkpolicy.yaml")}
    assert set(policies) == {"redis", "livetable-gateway", "livetable-engine", "livetable-media"}

    def allowed(spec: dict[str, Any]) -> list[tuple[str, int]]:
        out = []
        for rule in spec["ingress"]:
            for peer in rule["from"]:
                if "ipBlock" in peer:  # the studio's encoders (media)
                    out += [(peer["ipBlock"]["cidr"], port["port"]) for port in rule["ports"]]
                    continue
                name = peer["podSelector"].get("matchLabels", {}).get("app.kubernetes.io/name")
                names = [name] if name else [v for e in peer["podSelector"]["matchExpressions"]
                                             for v in e["values"]]
                out += [(n, port["port"]) for n in names for port in rule["ports"]]
        return sorted(out)

    assert allowed(policies["redis"]) == [("livetable-engine", 6379),
                                          ("livetable-gateway", 6379)]
    assert allowed(policies["livetable-gateway"]) == [("ingress-nginx", 8000),
                                                      ("prometheus", 8000)]
    assert allowed(policies["livetable-engine"]) == [("prometheus", 8001)]
    # the media server: HLS to the ingress controller, RTMP from the studio's range only
    assert allowed(policies["livetable-media"]) == [("192.0.2.0/24", 1935),
                                                    ("ingress-nginx", 8090)]
    for spec in policies.values():
        assert spec["policyTypes"] == ["Ingress"]


def nginx_blocks() -> dict[str, str]:
    """The text of each ``location`` block of deploy/nginx.conf, and of ``http``."""
    text = re.sub(r"#[^\n]*", "", (DEPLOY / "nginx.conf").read_text())
    blocks = {"http": text}
    for match in re.finditer(r"location\s+(=\s*)?(\S+)\s*\{([^}]*)\}", text):
        blocks[match.group(2)] = match.group(3)
    return blocks


def test_nginx_forwards_the_address_it_saw_and_limits_per_client() -> None:
    blocks = nginx_blocks()
    http = blocks["http"]
    assert re.search(r"proxy_set_header\s+X-Forwarded-For\s+\$remote_addr;", http)
    assert "$proxy_add_x_forwarded_for" not in http
    assert re.search(r"limit_conn_zone\s+\$binary_remote_addr\s+zone=livetable_conn", http)
    assert re.search(r"\n\s*limit_conn\s+livetable_conn\s+\d+;", http)
    assert "limit_req zone=livetable_api" in blocks["/api/"]
    assert "limit_req zone=livetable_guest" in blocks["/api/guest"]
    for websocket in ("/ws", "/ws/dealer"):
        assert "limit_req" not in blocks[websocket], websocket  # the connection cap only


# --- PostgreSQL as the system of record --------------------------------------------


def test_compose_postgres_gives_every_process_both_hosts_and_a_synchronous_standby() -> None:
    """Scale-out keeps the money in PostgreSQL (the Redis ledger was retired): every engine
    and gateway of the one compose file has its URL, and waits for both servers."""
    services = compose()["services"]
    base = livetable_services(compose())
    assert {"engine1", "engine2", "gateway1", "gateway2"} <= set(base)
    for name, svc in base.items():
        assert {"postgres-primary", "postgres-standby"} <= set(svc["depends_on"]), name
        url = svc["environment"]["LIVETABLE_POSTGRES_URL"]
        assert "${LIVETABLE_POSTGRES_PASSWORD:?" in url  # required, never a default
        assert "@postgres-primary:5432,postgres-standby:5432/" in url
        assert url.endswith("?target_session_attrs=read-write")  # follows a promotion
    init = (DEPLOY / "postgres" / "primary-init.sh").read_text()
    assert "synchronous_standby_names = 'ANY 1 (*)'" in init
    assert "synchronous_commit = 'on'" in init
    standby = services["postgres-standby"]
    assert standby["depends_on"]["postgres-primary"]["condition"] == "service_healthy"
    assert re.search(r"pg_basebackup .*\n?.*-R -X stream",
                     (DEPLOY / "postgres" / "standby.sh").read_text())
    for name in ("postgres-primary", "postgres-standby"):
        assert "ports" not in services[name]  # reached by livetable only


def test_kubernetes_postgres_is_a_cloudnativepg_cluster_with_sync_replicas_and_backups() -> None:
    folder = K8S / "postgres"
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert {"postgres/cluster.yaml", "postgres/networkpolicy.yaml"} <= set(
        kustomization["resources"])  # in the base: no scale-out without it
    for name in ("engine.yaml", "gateway.yaml"):
        (deployment,) = [d for d in k8s(name) if d["kind"] == "Deployment"]
        (env,) = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        assert env["name"] == "LIVETABLE_POSTGRES_URL"
        assert env["valueFrom"]["secretKeyRef"] == {"name": "livetable-pg-app", "key": "uri"}
    docs = {d["kind"]: d for d in yaml.safe_load_all((folder / "cluster.yaml").read_text())}
    cluster = docs["Cluster"]
    assert cluster["apiVersion"].startswith("postgresql.cnpg.io/")
    spec = cluster["spec"]
    assert spec["instances"] >= 2
    assert spec["postgresql"]["synchronous"]["number"] >= 1
    assert spec["postgresql"]["synchronous"]["dataDurability"] == "required"
    assert spec["backup"]["barmanObjectStore"]["wal"]  # WAL archived: point-in-time recovery
    assert docs["ScheduledBackup"]["spec"]["cluster"]["name"] == cluster["metadata"]["name"]
    (policy,) = yaml.safe_load_all((folder / "networkpolicy.yaml").read_text())
    assert policy["spec"]["podSelector"]["matchLabels"] == {
        "cnpg.io/cluster": cluster["metadata"]["name"]}
    livetable = policy["spec"]["ingress"][0]
    assert livetable["ports"] == [{"protocol": "TCP", "port": 5432}]
    assert livetable["from"][0]["podSelector"]["matchExpressions"][0]["values"] == [
        "livetable-engine", "livetable-gateway"]


def _ingress_match(path: str, kind: str, url: str) -> int:
    """How long a match Kubernetes' Ingress path ``path`` (``kind``) is for ``url``
    (-1: none). Prefix matches element by element of the "/"-split path."""
    if kind == "Exact":
        return len(path) if url == path else -1
    want = [e for e in path.split("/") if e]
    have = [e for e in url.split("/") if e]
    return len(path) if have[:len(want)] == want else -1


@pytest.mark.parametrize("url", ["/metrics", "/metrics/", "/metrics/x"])
def test_the_kubernetes_ingress_does_not_expose_metrics(url: str) -> None:
    """The money path's attack 7 (docs/security.md): the Ingress routed /metrics to the gateways
    like any path (the
    nginx of deploy/ answers it 404). The longest path that matches it must be an Ingress
    that refuses every address."""
    best: tuple[int, dict[str, Any]] | None = None
    for ingress in k8s("ingress.yaml"):
        for rule in ingress["spec"]["rules"]:
            for route in rule["http"]["paths"]:
                n = _ingress_match(route["path"], route["pathType"], url)
                if n >= 0 and (best is None or n > best[0]):
                    best = (n, ingress)
    assert best is not None
    annotations = best[1]["metadata"].get("annotations", {})
    denied = annotations.get("nginx.ingress.kubernetes.io/denylist-source-range", "")
    assert {r.strip() for r in denied.split(",")} >= {"0.0.0.0/0", "::/0"}, best[1]["metadata"]


def test_only_engines_get_the_shoe_key() -> None:
    """The money path's attack 2 (docs/security.md): the shoe key is the engines' alone (a gateway
    never opens a
    sealed state), and required for them."""
    services = livetable_services(compose())
    for name, svc in services.items():
        has = "LIVETABLE_SHOE_KEY" in svc["environment"]
        assert has == (svc["command"][1] == "engine"), name
        if has:
            assert ":?" in svc["environment"]["LIVETABLE_SHOE_KEY"], name  # required
    refs = {}
    for name in ("engine.yaml", "gateway.yaml"):
        for doc in k8s(name):
            if doc["kind"] == "Deployment":
                container = doc["spec"]["template"]["spec"]["containers"][0]
                refs[name] = {e.get("secretRef", {}).get("name") for e in container["envFrom"]}
    assert "livetable-shoe" in refs["engine.yaml"]
    assert "livetable-shoe" not in refs["gateway.yaml"]
    secrets = {d["metadata"]["name"]: d["stringData"] for d in k8s("secret.example.yaml")}
    assert "LIVETABLE_SHOE_KEY" in secrets["livetable-shoe"]
    assert "LIVETABLE_SHOE_KEY" not in secrets["livetable"]
