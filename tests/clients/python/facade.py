"""Drives the kubesearch facade with the Python kubernetes client (TestRealClients/python).

It reads Pods of one namespace through the kubeconfig's fleet context (kubesearch) and qualified
context (kubesearch-qualified) the way a script would: lists, gets, selectors, a refused create and a
watch. It asserts nothing itself: each step prints one JSON line on stdout with what the client
returned (names, clusters, HTTP statuses, events), and the Go test compares that with the members.
The watch starts from the fleet list's resourceVersion, after a {"step": "watching"} line: the test
creates a Pod in a member then, and the script ends once that Pod's ADDED arrives, or at the timeout.
"""

import argparse
import json
import sys

from kubernetes import client, config, watch

CLUSTER = "resource.karmada.io/cached-from-cluster"


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def pod(p):
    annotations = p.metadata.annotations or {}
    return {"namespace": p.metadata.namespace, "name": p.metadata.name,
            "cluster": annotations.get(CLUSTER, ""), "labels": p.metadata.labels or {}}


def refused(step, call):
    """Runs call, which should fail, and reports the status the server gave."""
    try:
        got = call()
    except client.ApiException as e:
        body = {}
        try:
            body = json.loads(e.body or "{}")
        except ValueError:
            pass
        emit(step, status=e.status, reason=body.get("reason", ""), message=body.get("message", ""))
        return
    emit(step, status=200, unexpected=pod(got))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--unique", required=True, help="a Pod name one member has")
    ap.add_argument("--twin", required=True, help="a Pod name every member has")
    ap.add_argument("--label-selector", required=True)
    ap.add_argument("--watch-for", required=True, help="the Pod whose ADDED ends the watch")
    ap.add_argument("--timeout", type=int, default=90)
    args = ap.parse_args()
    ns = args.namespace

    fleet = client.CoreV1Api(config.new_client_from_config(args.kubeconfig, context="kubesearch"))
    qualified = client.CoreV1Api(config.new_client_from_config(args.kubeconfig, context="kubesearch-qualified"))

    everything = fleet.list_pod_for_all_namespaces()
    emit("fleet-list", pods=[pod(p) for p in everything.items if p.metadata.namespace == ns])
    listed = qualified.list_namespaced_pod(ns).items
    emit("qualified-list", pods=[pod(p) for p in listed])
    emit("get", pod=pod(fleet.read_namespaced_pod(args.unique, ns)))
    refused("get-twin", lambda: fleet.read_namespaced_pod(args.twin, ns))
    # The qualified view names the twins <name>_<cluster>: each is one object there.
    twins = sorted(p.metadata.name for p in listed if p.metadata.name.startswith(args.twin + "_"))
    emit("qualified-get", pods=[pod(qualified.read_namespaced_pod(name, ns)) for name in twins])
    emit("label-selector", pods=[pod(p) for p in fleet.list_namespaced_pod(ns, label_selector=args.label_selector).items])
    emit("field-selector", pods=[pod(p) for p in fleet.list_namespaced_pod(ns, field_selector="metadata.name=" + args.twin).items])
    if twins:
        emit("qualified-field-selector", selector="metadata.name=" + twins[-1],
             pods=[pod(p) for p in qualified.list_namespaced_pod(ns, field_selector="metadata.name=" + twins[-1]).items])
    body = client.V1Pod(metadata=client.V1ObjectMeta(name="written-by-python"),
                        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]))
    refused("create", lambda: fleet.create_namespaced_pod(ns, body))

    rv = fleet.list_namespaced_pod(ns).metadata.resource_version
    emit("watching", resourceVersion=rv)
    events = []
    for ev in watch.Watch().stream(fleet.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=args.timeout):
        events.append({"type": ev["type"], **pod(ev["object"])})
        if ev["type"] == "ADDED" and ev["object"].metadata.name == args.watch_for:
            break
    emit("watch", events=events)


if __name__ == "__main__":
    try:
        main()
    except client.ApiException as e:
        print("the client failed: %s %s: %s" % (e.status, e.reason, e.body), file=sys.stderr)
        sys.exit(1)
