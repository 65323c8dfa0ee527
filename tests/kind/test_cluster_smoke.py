"""Smoke tests of the kind cluster itself: the things the tfk8s launcher relies on.

Real cluster, no mocks: node readiness, CoreDNS, pod DNS through a headless Service
(hostname/subdomain, as TF_CONFIG addresses use), pod-to-pod traffic between nodes with the
source address kept (NetworkPolicy matches it), the API server through its ClusterIP
(kube-proxy), `kind load docker-image`, Pod Security "restricted" admission, and a
checkpoint volume that every node sees.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.kind

# Prints what the probe saw as one JSON line; exits non-zero on failure.
DNS_CLIENT = r"""
import json, socket, sys, time, urllib.request
fqdn, port = sys.argv[1], int(sys.argv[2])
deadline, last = time.time() + 60, None
while time.time() < deadline:
    try:
        ip = socket.getaddrinfo(fqdn, port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
        body = urllib.request.urlopen(f"http://{fqdn}:{port}/", timeout=5).read().decode()
        print(json.dumps({"ip": ip, "body": body}))
        sys.exit(0)
    except Exception as e:  # DNS records appear once the server pod is ready
        last = repr(e)
        time.sleep(1)
print(json.dumps({"error": last}))
sys.exit(1)
"""

DNS_SERVER = r"""
import http.server, socket
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = socket.gethostname().encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("0.0.0.0", 8080), H).serve_forever()
"""

# Answers each connection with the address it came from.
PEER_ECHO = r"""
import socket
srv = socket.create_server(("0.0.0.0", 8080))
while True:
    conn, (host, _) = srv.accept()
    conn.sendall(host.encode())
    conn.close()
"""

PEER_CLIENT = r"""
import json, socket, sys, time
ip, deadline, last = sys.argv[1], time.time() + 60, None
while time.time() < deadline:
    try:
        with socket.create_connection((ip, 8080), timeout=5) as s:
            print(json.dumps({"seen_as": s.recv(64).decode(), "own": s.getsockname()[0]}))
            sys.exit(0)
    except OSError as e:
        last = repr(e)
        time.sleep(1)
print(json.dumps({"error": last}))
sys.exit(1)
"""

API_CLIENT = r"""
import json, os, socket, ssl, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
token = open(f"{sa}/token").read()
ctx = ssl.create_default_context(cafile=f"{sa}/ca.crt")
resolved = socket.getaddrinfo("kubernetes.default", 443, socket.AF_INET)[0][4][0]
out = {"resolved": resolved, "env_host": os.environ.get("KUBERNETES_SERVICE_HOST")}
# through the name (the certificate is issued for kubernetes.default) and through the ClusterIP
for key, url in (("by_name", "https://kubernetes.default/version"),
                 ("by_ip", f"https://{resolved}:443/api")):
    if key == "by_ip":
        ctx.check_hostname = False  # an IP literal: the CA still verifies the chain
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    out[key] = json.loads(urllib.request.urlopen(req, context=ctx, timeout=10).read())
print(json.dumps(out))
"""


def _wait_succeeded(cluster, ns: str, pod: str, timeout: str = "180s") -> str:
    r = cluster.kubectl(
        "-n", ns, "wait", "--for=jsonpath={.status.phase}=Succeeded", f"pod/{pod}", f"--timeout={timeout}", check=False
    )
    logs = cluster.kubectl("-n", ns, "logs", pod, check=False).stdout
    if r.returncode != 0:
        desc = cluster.kubectl("-n", ns, "describe", "pod", pod, check=False).stdout
        pytest.fail(f"pod {pod} did not succeed: {r.stderr}\nlogs:\n{logs}\n{desc[-3000:]}")
    return logs


def test_node_ready_and_coredns_running(kind_cluster):
    nodes = kind_cluster.get_json("nodes")["items"]
    assert nodes, "no nodes"
    for node in nodes:
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}.get("Ready")
        assert ready == "True", f"node {node['metadata']['name']} not Ready: {node['status']['conditions']}"
    kind_cluster.kubectl("-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=180s")
    pods = kind_cluster.get_json("pods", "-n", "kube-system", "-l", "k8s-app=kube-dns")["items"]
    assert pods and all(p["status"]["phase"] == "Running" for p in pods)


def test_kind_load_docker_image(kind_cluster, probe_image):
    # the probe_image fixture ran `kind load docker-image`; containerd in the node has it now
    names = kind_cluster.node_images()
    short = probe_image.split("/")[-1]
    assert any(n.endswith(short) for n in names), f"{probe_image} not in node images: {names}"


def test_pod_dns_through_headless_service(kind_cluster, namespace, probe_image, restricted_pod):
    svc = "grp"
    kind_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": svc},
            "spec": {
                "clusterIP": "None",
                "selector": {"tfk8s-smoke": svc},
                "publishNotReadyAddresses": True,
                "ports": [{"name": "http", "port": 8080}],
            },
        },
        namespace,
    )
    server = restricted_pod("server", probe_image, ["python3", "-c", DNS_SERVER], hostname="server", subdomain=svc)
    server["metadata"]["labels"]["tfk8s-smoke"] = svc
    server["spec"]["restartPolicy"] = "Always"
    kind_cluster.apply(server, namespace)
    kind_cluster.kubectl("-n", namespace, "wait", "--for=condition=Ready", "pod/server", "--timeout=180s")
    server_ip = kind_cluster.get_json("pod", "-n", namespace, "server")["status"]["podIP"]

    fqdn = f"server.{svc}.{namespace}.svc.cluster.local"
    client = restricted_pod(
        "client", probe_image, ["python3", "-c", DNS_CLIENT, fqdn, "8080"], hostname="client", subdomain=svc
    )
    kind_cluster.apply(client, namespace)
    out = json.loads(_wait_succeeded(kind_cluster, namespace, "client").strip().splitlines()[-1])
    assert out["ip"] == server_ip
    assert out["body"] == "server"


def test_pods_on_different_nodes_reach_each_other_unmasqueraded(kind_cluster, namespace, probe_image, restricted_pod):
    nodes = sorted(kind_cluster.node_names())
    assert len(nodes) >= 2, f"the kind tier needs two nodes, has {nodes}"
    server = restricted_pod("echo", probe_image, ["python3", "-c", PEER_ECHO], nodeName=nodes[1])
    server["spec"]["restartPolicy"] = "Always"
    kind_cluster.apply(server, namespace)
    kind_cluster.kubectl("-n", namespace, "wait", "--for=condition=Ready", "pod/echo", "--timeout=180s")
    server_ip = kind_cluster.get_json("pod", "-n", namespace, "echo")["status"]["podIP"]
    kind_cluster.apply(
        restricted_pod("peer", probe_image, ["python3", "-c", PEER_CLIENT, server_ip], nodeName=nodes[0]), namespace
    )
    out = json.loads(_wait_succeeded(kind_cluster, namespace, "peer").strip().splitlines()[-1])
    client_ip = kind_cluster.get_json("pod", "-n", namespace, "peer")["status"]["podIP"]
    # routed, not SNATed to the node: NetworkPolicy's podSelector rules match pod addresses
    assert out["seen_as"] == out["own"] == client_ip, out


def test_api_server_reachable_from_pod_via_cluster_ip(kind_cluster, namespace, probe_image, restricted_pod):
    cluster_ip = kind_cluster.get_json("service", "-n", "default", "kubernetes")["spec"]["clusterIP"]
    kind_cluster.apply(restricted_pod("api", probe_image, ["python3", "-c", API_CLIENT]), namespace)
    out = json.loads(_wait_succeeded(kind_cluster, namespace, "api").strip().splitlines()[-1])
    assert out["resolved"] == cluster_ip  # kubernetes.default -> the Service's ClusterIP (CoreDNS)
    assert out["env_host"] == cluster_ip
    assert out["by_name"]["gitVersion"].startswith("v1.")
    assert "v1" in out["by_ip"]["versions"]  # authenticated with the pod's ServiceAccount token


def test_restricted_namespace_rejects_privileged_pod(kind_cluster, namespace, probe_image, restricted_pod):
    bad = restricted_pod("privileged", probe_image, ["sleep", "1"])
    bad["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    r = kind_cluster.kubectl("-n", namespace, "create", "-f", "-", input=json.dumps(bad), check=False)
    assert r.returncode != 0, "a privileged pod was admitted into a restricted namespace"
    assert 'violates PodSecurity "restricted' in r.stderr, r.stderr
    assert "privileged" in r.stderr
    # ... while a compliant pod is admitted (server-side dry run: same admission chain)
    good = restricted_pod("compliant", probe_image, ["sleep", "1"])
    kind_cluster.kubectl("-n", namespace, "create", "--dry-run=server", "-f", "-", input=json.dumps(good))


def test_checkpoint_pvc_is_writable_by_nonroot_pod(
    kind_cluster, namespace, checkpoint_pvc, probe_image, restricted_pod
):
    # written on the worker node, read back through the control-plane node's mount
    worker_node = [n for n in kind_cluster.node_names() if n != kind_cluster.node][0]
    pod = restricted_pod(
        "writer",
        probe_image,
        ["python3", "-c", "open('/ckpt/probe.txt','w').write('ok')"],
        volumes=[{"name": "ckpt", "persistentVolumeClaim": {"claimName": checkpoint_pvc.claim_name}}],
        nodeName=worker_node,
    )
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "ckpt", "mountPath": "/ckpt"}]
    kind_cluster.apply(pod, namespace)
    _wait_succeeded(kind_cluster, namespace, "writer")
    got = kind_cluster.docker_exec("cat", f"{checkpoint_pvc.node_path}/probe.txt").stdout
    assert got == "ok"
