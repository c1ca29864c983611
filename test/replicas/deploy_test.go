package replicas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// manifests decodes every document of deploy/kubernetes/*.yaml.
func manifests(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	docs := map[string]map[string]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc map[string]any
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, f)
			if doc == nil {
				continue
			}
			kind, _ := doc["kind"].(string)
			name, _ := dig(doc, "metadata", "name").(string)
			require.NotEmpty(t, doc["apiVersion"], f)
			require.NotEmpty(t, kind, f)
			require.NotEmpty(t, name, f)
			docs[kind+"/"+name] = doc
		}
	}
	return docs
}

// dig walks maps by key and lists by the first element whose "name" is the
// key (containers, env, volumes), or by index "0".
func dig(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			v = nil
			for i, e := range x {
				if m, ok := e.(map[string]any); ok && m["name"] == p || p == "0" && i == 0 {
					v = e
					break
				}
			}
		default:
			return nil
		}
	}
	return v
}

// TestKubernetesManifests: the manifests parse, and the Deployment has what
// docs/deployment.md promises: replicas sharing one ReadWriteMany volume and
// the Redis, liveness on /healthz and readiness on /readyz, resources, a read-only root filesystem, a
// non-root user, and a Service without affinity; the image by tag; Redis
// with a password from a Secret, reachable from toolfs-api's pods alone.
func TestKubernetesManifests(t *testing.T) {
	docs := manifests(t)
	dep := docs["Deployment/toolfs-api"]
	require.NotNil(t, dep, "Deployment/toolfs-api")
	assert.GreaterOrEqual(t, dig(dep, "spec", "replicas"), 2)
	pod := dig(dep, "spec", "template", "spec")
	assert.Equal(t, true, dig(pod, "securityContext", "runAsNonRoot"))
	assert.NotZero(t, dig(pod, "securityContext", "runAsUser"))
	c := dig(pod, "containers", "toolfs-api")
	require.NotNil(t, c)
	assert.Equal(t, true, dig(c, "securityContext", "readOnlyRootFilesystem"))
	assert.Equal(t, false, dig(c, "securityContext", "allowPrivilegeEscalation"))
	assert.Equal(t, "/healthz", dig(c, "livenessProbe", "httpGet", "path"), "liveness")
	assert.Equal(t, "/readyz", dig(c, "readinessProbe", "httpGet", "path"), "readiness: Redis and the issuer (docs/deployment.md)")
	assert.NotNil(t, dig(c, "resources", "requests", "cpu"))
	assert.NotNil(t, dig(c, "resources", "requests", "memory"))
	assert.NotNil(t, dig(c, "resources", "limits", "memory"))

	// A release's image by its tag, never :latest or untagged
	// (docs/deployment.md, "Kubernetes").
	image, _ := dig(c, "image").(string)
	assert.Regexp(t, `^ghcr\.io/toolfs/toolfs-api:v\d+\.\d+\.\d+$`, image)

	// Redis asks for a password from a Secret, and the server's URL
	// carries the same Secret's value, expanded from a variable defined
	// before it.
	secret := map[string]any{"name": "toolfs-redis", "key": "password"}
	assert.Equal(t, secret, dig(c, "env", "REDIS_PASSWORD", "valueFrom", "secretKeyRef"))
	env, _ := dig(c, "env").([]any)
	var order []any
	for _, e := range env {
		order = append(order, dig(e, "name"))
	}
	assert.Less(t, slices.Index(order, "REDIS_PASSWORD"), slices.Index(order, "TOOLFS_SESSION_STORE"), "the password before the URL that expands it")
	store, _ := dig(c, "env", "TOOLFS_SESSION_STORE", "value").(string)
	assert.Equal(t, "redis://:$(REDIS_PASSWORD)@toolfs-redis:6379/0", store)
	assert.NotNil(t, docs["Service/toolfs-redis"])
	redisPod := dig(docs["StatefulSet/toolfs-redis"], "spec", "template", "spec", "containers", "redis")
	require.NotNil(t, redisPod, "StatefulSet/toolfs-redis")
	assert.Contains(t, fmt.Sprint(dig(redisPod, "args")), "--requirepass $(REDIS_PASSWORD)")
	assert.Equal(t, secret, dig(redisPod, "env", "REDIS_PASSWORD", "valueFrom", "secretKeyRef"))
	assert.Equal(t, secret, dig(redisPod, "env", "REDISCLI_AUTH", "valueFrom", "secretKeyRef"), "the probes' redis-cli authenticates")
	assert.Empty(t, docs["Secret/toolfs-redis"], "no password is shipped: the operator makes the Secret")

	// Only toolfs-api's pods reach Redis, on its port.
	np := docs["NetworkPolicy/toolfs-redis"]
	require.NotNil(t, np, "NetworkPolicy/toolfs-redis")
	assert.Equal(t, "networking.k8s.io/v1", np["apiVersion"])
	assert.Equal(t, dig(docs["StatefulSet/toolfs-redis"], "spec", "template", "metadata", "labels"), dig(np, "spec", "podSelector", "matchLabels"))
	assert.Equal(t, []any{"Ingress"}, dig(np, "spec", "policyTypes"))
	ingress, _ := dig(np, "spec", "ingress").([]any)
	require.Len(t, ingress, 1, "one rule")
	from, _ := dig(ingress[0], "from").([]any)
	require.Len(t, from, 1, "one source")
	assert.Equal(t, map[string]any{"podSelector": map[string]any{"matchLabels": dig(dep, "spec", "template", "metadata", "labels")}}, from[0])
	assert.Equal(t, []any{map[string]any{"protocol": "TCP", "port": 6379}}, dig(ingress[0], "ports"))
	// docs/deployment.md, "How much memory": 1.8 times what the default
	// caps hold (sessions, and what the replicas share besides),
	// noeviction, and a limit of twice maxmemory.
	args := fmt.Sprint(dig(redisPod, "args"))
	assert.Contains(t, args, "--maxmemory 200mb --maxmemory-policy noeviction")
	assert.Equal(t, "400Mi", dig(redisPod, "resources", "limits", "memory"))
	assert.Equal(t, "/workspace", dig(c, "env", "TOOLFS_ROOT", "value"))
	assert.Equal(t, "/workspace", dig(c, "volumeMounts", "workspace", "mountPath"))
	// The lock files live in the root (<root>/.toolfs-api/locks), so on the
	// shared volume; --lock-dir off would let replicas lose updates.
	assert.Nil(t, dig(c, "env", "TOOLFS_LOCK_DIR"), "no --lock-dir: the default shares the locks")
	assert.NotNil(t, dig(c, "env", "TOOLFS_TOKEN", "valueFrom", "secretKeyRef"))

	claim := dig(pod, "volumes", "workspace", "persistentVolumeClaim", "claimName")
	pvc := docs["PersistentVolumeClaim/"+claim.(string)]
	require.NotNil(t, pvc, "the workspace claim")
	assert.Equal(t, []any{"ReadWriteMany"}, dig(pvc, "spec", "accessModes"))

	svc := docs["Service/toolfs-api"]
	require.NotNil(t, svc)
	assert.Equal(t, dig(dep, "spec", "template", "metadata", "labels"), dig(svc, "spec", "selector"))
	assert.Equal(t, "None", dig(svc, "spec", "sessionAffinity"))
	// SPEC §17: no sticky routing anywhere in deploy/.
	for name, doc := range docs {
		if doc["kind"] == "Service" {
			assert.NotEqual(t, "ClientIP", dig(doc, "spec", "sessionAffinity"), name)
		}
	}
	assert.Nil(t, docs["Service/toolfs-api-mcp"], "no Service with affinity for /mcp")
}

// TestSystemdUnit: the unit is hardened as docs/deployment.md says, and
// systemd-analyze (when present) finds nothing to complain about.
func TestSystemdUnit(t *testing.T) {
	src, err := os.ReadFile("../../deploy/systemd/toolfs-api@.service")
	require.NoError(t, err)
	unit := string(src)
	for _, want := range []string{"User=toolfs", "NoNewPrivileges=yes", "ProtectSystem=strict", "ReadWritePaths=",
		"ProtectHome=yes", "CapabilityBoundingSet=\n", "Environment=TOOLFS_ADDR=127.0.0.1:%i", "KillSignal=SIGTERM", "Restart=always"} {
		assert.Contains(t, unit, want)
	}
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not found: the unit was checked as text only")
		return
	}
	dir := t.TempDir()
	// verify needs an existing binary and an instance name.
	text := strings.Replace(unit, "ExecStart=/usr/local/bin/toolfs-api", "ExecStart="+serverBin, 1)
	path := filepath.Join(dir, "toolfs-api@8081.service")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	out, err := exec.Command(bin, "verify", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Empty(t, strings.TrimSpace(string(out)))
}
