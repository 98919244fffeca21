// contrib/kubernetes/pycell.yaml, checked offline: every document against
// the Kubernetes API schema (the npm package kubernetes-models, generated
// from Kubernetes' OpenAPI spec: types, enums, required fields; it does not
// refuse unknown fields, so the settings pycell depends on are asserted
// one by one below), and what the manifests promise: no privileged
// container, a pod user namespace, an unmasked /proc, a Localhost seccomp
// profile, the RuntimeClass they name, /healthz for readiness.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { parseAllDocuments } from "yaml";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { Service } from "kubernetes-models/v1/Service";
import { RuntimeClass } from "kubernetes-models/node.k8s.io/v1/RuntimeClass";

const here = path.dirname(fileURLToPath(import.meta.url));
const FILE = path.resolve(here, "../../../contrib/kubernetes/pycell.yaml");
const MODELS = { "apps/v1 Deployment": Deployment, "v1 Service": Service, "node.k8s.io/v1 RuntimeClass": RuntimeClass };

function documents() {
  const docs = parseAllDocuments(readFileSync(FILE, "utf8"));
  for (const d of docs) assert.deepEqual(d.errors, [], `YAML errors in ${FILE}`);
  return docs.map((d) => d.toJS()).filter(Boolean);
}

test("every manifest validates against the Kubernetes API schema", () => {
  const docs = documents();
  assert.deepEqual(docs.map((d) => `${d.apiVersion} ${d.kind}`).sort(),
    ["apps/v1 Deployment", "node.k8s.io/v1 RuntimeClass", "v1 Service"]);
  for (const d of docs) {
    const Model = MODELS[`${d.apiVersion} ${d.kind}`];
    assert.doesNotThrow(() => new Model(d).validate(), `${d.kind} ${d.metadata.name}`);
  }
});

test("the schema check can fail: a wrong type is caught", () => {
  const dep = documents().find((d) => d.kind === "Deployment");
  dep.spec.template.spec.hostUsers = "false";
  assert.throws(() => new Deployment(dep).validate(), /hostUsers must be boolean/);
});

test("pycell runs unprivileged, in a user namespace, with what its jails need", () => {
  const docs = documents();
  const dep = docs.find((d) => d.kind === "Deployment");
  const rc = docs.find((d) => d.kind === "RuntimeClass");
  const svc = docs.find((d) => d.kind === "Service");
  const pod = dep.spec.template.spec;
  assert.equal(pod.hostUsers, false);
  assert.equal(pod.runtimeClassName, rc.metadata.name);
  assert.deepEqual(pod.securityContext.seccompProfile, { type: "Localhost", localhostProfile: "profiles/pycell.json" });
  assert.equal(pod.securityContext.runAsNonRoot, true);
  for (const c of [...pod.containers, ...pod.initContainers]) {
    assert.notEqual(c.securityContext.privileged, true, c.name);
    assert.equal(c.securityContext.allowPrivilegeEscalation, false, c.name);
    assert.deepEqual(c.securityContext.capabilities, { drop: ["ALL"] }, c.name);
  }
  const main = pod.containers.find((c) => c.name === "pycell");
  assert.equal(main.securityContext.procMount, "Unmasked");
  // a shell expands $POD_NAME (podman kube play does not expand $(VAR))
  assert.deepEqual(main.command.slice(0, 2), ["sh", "-c"]);
  assert.match(main.command[2], /^exec pycell serve .*--tokens \/run\/pycell\/tokens\.json .*--replica "\$POD_NAME"/);
  assert.ok(main.env.some((e) => e.name === "POD_NAME" && e.valueFrom.fieldRef.fieldPath === "metadata.name"));
  // the token file is written by the image's pycell user, 0600, from the Secret
  const init = pod.initContainers.find((c) => c.name === "tokens");
  assert.match(init.command[2], /^umask 077 && /);
  assert.deepEqual(init.env[0].valueFrom.secretKeyRef, { name: "pycell-tokens", key: "tokens.json" });
  assert.equal(pod.securityContext.runAsUser, 999);
  assert.deepEqual(main.readinessProbe.httpGet, { path: "/healthz", port: "mcp" });
  // SIGTERM drains for 30 s: the pod's grace period is longer
  assert.ok(pod.terminationGracePeriodSeconds > 30);
  assert.deepEqual(svc.spec.selector, dep.spec.selector.matchLabels);
  assert.equal(svc.spec.ports[0].targetPort, "mcp");
});
