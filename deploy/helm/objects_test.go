package helm_test

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/node"
)

// get walks a decoded object along keys (map keys, or list indexes given
// as ints) and returns what is there, or nil.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string { s, _ := get(v, path...).(string); return s }

func list(v any, path ...any) []any { l, _ := get(v, path...).([]any); return l }

// num reads a number that JSON decoded as float64.
func num(v any, path ...any) int { f, _ := get(v, path...).(float64); return int(f) }

// find returns the object of that kind and name, failing when it is
// missing.
func find(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == kind && str(o, "metadata", "name") == name {
			return o
		}
	}
	t.Fatalf("no %s %q rendered", kind, name)
	return nil
}

// ofKind returns the objects of a kind.
func ofKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o["kind"] == kind {
			out = append(out, o)
		}
	}
	return out
}

// only returns the one object of a kind, failing unless there is exactly
// one.
func only(t *testing.T, objs []object, kind string) object {
	t.Helper()
	found := ofKind(objs, kind)
	if len(found) != 1 {
		t.Fatalf("%d %s objects rendered, want 1", len(found), kind)
	}
	return found[0]
}

// container returns the named container (or init container) of a pod
// spec.
func container(t *testing.T, podSpec any, field, name string) map[string]any {
	t.Helper()
	for _, c := range list(podSpec, field) {
		if str(c, "name") == name {
			return c.(map[string]any)
		}
	}
	t.Fatalf("no %s %q in the pod spec", field, name)
	return nil
}

// labelsMatch reports whether every selector label is among labels.
func labelsMatch(selector, labels any) bool {
	sel, _ := selector.(map[string]any)
	lab, _ := labels.(map[string]any)
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if lab[k] != v {
			return false
		}
	}
	return true
}

// envValue returns the literal value of a container's environment
// variable, and whether it is set.
func envValue(c map[string]any, name string) (string, bool) {
	for _, e := range list(c, "env") {
		if str(e, "name") == name {
			return str(e, "value"), true
		}
	}
	return "", false
}

// TestChart_ObjectsAgree checks the rendered objects against each other:
// the StatefulSet's serviceName is the headless Service, the Services and
// the PodDisruptionBudget select the StatefulSet's pods, every Service
// port targets a container port of the same protocol, the addresses ferryd
// is given use those ports, the probes ask the admin port over HTTPS at
// paths the node serves, every mount names a volume and every file ferryd
// is given lies in one.
func TestChart_ObjectsAgree(t *testing.T) {
	paths := servedPaths(t)
	for _, c := range valueCases {
		t.Run(c.name, func(t *testing.T) {
			objs := renderObjects(t, c.args...)
			sts := only(t, objs, "StatefulSet")
			pod := get(sts, "spec", "template", "spec")
			ferryd := container(t, pod, "containers", "ferryd")
			checkServices(t, objs, sts, ferryd)
			checkPDB(t, objs, sts)
			checkAddresses(t, sts, ferryd)
			checkProbes(t, ferryd, paths)
			checkVolumes(t, objs, sts)
			checkGracePeriod(t, objs, sts)
			if sm := ofKind(objs, "ServiceMonitor"); len(sm) > 0 {
				checkServiceMonitor(t, objs, sm[0], ferryd)
			}
		})
	}
}

func checkServices(t *testing.T, objs []object, sts object, ferryd map[string]any) {
	t.Helper()
	podLabels := get(sts, "spec", "template", "metadata", "labels")
	if sel := get(sts, "spec", "selector", "matchLabels"); !labelsMatch(sel, podLabels) {
		t.Errorf("StatefulSet selector %v does not match its pod labels %v", sel, podLabels)
	}
	headless := find(t, objs, "Service", str(sts, "spec", "serviceName"))
	if str(headless, "spec", "clusterIP") != "None" || get(headless, "spec", "publishNotReadyAddresses") != true {
		t.Errorf("service %s: want clusterIP None and publishNotReadyAddresses true, spec %v",
			str(headless, "metadata", "name"), headless["spec"])
	}
	client := find(t, objs, "Service", str(sts, "metadata", "name"))
	ports := map[string]any{}
	for _, p := range list(ferryd, "ports") {
		ports[str(p, "name")] = p
	}
	for _, svc := range []object{headless, client} {
		name := str(svc, "metadata", "name")
		if !labelsMatch(get(svc, "spec", "selector"), podLabels) {
			t.Errorf("service %s selects %v, not the pods (%v)", name, get(svc, "spec", "selector"), podLabels)
		}
		for _, sp := range list(svc, "spec", "ports") {
			cp, ok := ports[str(sp, "targetPort")]
			if !ok {
				t.Errorf("service %s port %s targets %q, no container port of that name", name, str(sp, "name"), str(sp, "targetPort"))
				continue
			}
			if str(sp, "protocol") != str(cp, "protocol") || num(sp, "port") != num(cp, "containerPort") {
				t.Errorf("service %s port %v does not match container port %v", name, sp, cp)
			}
		}
	}
	want := map[string][]string{
		str(headless, "metadata", "name"): {"raft", "gossip", "gossip-udp", "client", "admin"},
		str(client, "metadata", "name"):   {"client", "admin"},
	}
	if _, sqs := ports["sqs"]; sqs {
		want[str(client, "metadata", "name")] = append(want[str(client, "metadata", "name")], "sqs")
	}
	for _, svc := range []object{headless, client} {
		var got []string
		for _, sp := range list(svc, "spec", "ports") {
			got = append(got, str(sp, "name"))
		}
		if w := want[str(svc, "metadata", "name")]; !slices.Equal(got, w) {
			t.Errorf("service %s ports %v, want %v", str(svc, "metadata", "name"), got, w)
		}
	}
}

func checkPDB(t *testing.T, objs []object, sts object) {
	t.Helper()
	pdb := only(t, objs, "PodDisruptionBudget")
	if !labelsMatch(get(pdb, "spec", "selector", "matchLabels"), get(sts, "spec", "template", "metadata", "labels")) {
		t.Errorf("PodDisruptionBudget selects %v, not the StatefulSet's pods", get(pdb, "spec", "selector"))
	}
	if get(pdb, "spec", "maxUnavailable") != float64(1) {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", get(pdb, "spec", "maxUnavailable"))
	}
}

// checkAddresses checks that each address ferryd listens on is the pod IP
// and the container port of that name, and that -join names the headless
// Service's gossip port.
func checkAddresses(t *testing.T, sts object, ferryd map[string]any) {
	t.Helper()
	ports := map[string]int{}
	for _, p := range list(ferryd, "ports") {
		ports[str(p, "name")] = num(p, "containerPort")
	}
	if str(ferryd, "env", 1, "name") != "FERRY_IP" || str(ferryd, "env", 1, "valueFrom", "fieldRef", "fieldPath") != "status.podIP" {
		t.Errorf("FERRY_IP must come second, from status.podIP: env %v", list(ferryd, "env"))
	}
	for env, port := range map[string]string{"FERRY_RAFT_ADDR": "raft", "FERRY_CLIENT_ADDR": "client",
		"FERRY_HTTP_ADDR": "admin", "FERRY_GOSSIP_ADDR": "gossip", "FERRY_SQS_ADDR": "sqs"} {
		v, ok := envValue(ferryd, env)
		if !ok && port == "sqs" {
			if _, on := ports["sqs"]; on {
				t.Errorf("an sqs port but no FERRY_SQS_ADDR")
			}
			continue
		}
		if want := fmt.Sprintf("$(FERRY_IP):%d", ports[port]); v != want {
			t.Errorf("%s=%q, want %q (container port %s)", env, v, want, port)
		}
	}
	ns := str(sts, "metadata", "namespace")
	if ns == "" {
		ns = namespace
	}
	join, _ := envValue(ferryd, "FERRY_JOIN")
	want := fmt.Sprintf("%s.%s.svc.cluster.local:%d", str(sts, "spec", "serviceName"), ns, ports["gossip"])
	if join != want {
		t.Errorf("FERRY_JOIN=%q, want the headless Service's gossip port %q", join, want)
	}
	// Two groups of nodes could each form a cluster unless it takes
	// more than half of them.
	v, _ := envValue(ferryd, "FERRY_BOOTSTRAP_EXPECT")
	if n, err := strconv.Atoi(v); err != nil || n > num(sts, "spec", "replicas") || 2*n <= num(sts, "spec", "replicas") {
		t.Errorf("FERRY_BOOTSTRAP_EXPECT=%q with %d replicas: want more than half of them", v, num(sts, "spec", "replicas"))
	}
	if str(sts, "spec", "podManagementPolicy") != "Parallel" {
		t.Errorf("podManagementPolicy %q: the first start needs every pod at once", str(sts, "spec", "podManagementPolicy"))
	}
}

// servedPaths reads the GET paths the node's admin server registers.
func servedPaths(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile("../../node/http.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`Handle(?:Func)?\("GET (/[^"]*)"`).FindAllStringSubmatch(string(src), -1) {
		out[m[1]] = true
	}
	if !out["/healthz"] {
		t.Fatalf("no GET /healthz found in node/http.go: %v", out)
	}
	return out
}

func checkProbes(t *testing.T, ferryd map[string]any, served map[string]bool) {
	t.Helper()
	want := map[string]string{"startupProbe": "/healthz", "readinessProbe": "/readyz", "livenessProbe": "/healthz"}
	for probe, path := range want {
		g := get(ferryd, probe, "httpGet")
		if g == nil {
			t.Errorf("no %s.httpGet", probe)
			continue
		}
		if got := str(g, "path"); got != path || !served[got] {
			t.Errorf("%s path %q (served by node/http.go: %v), want %q", probe, got, served[got], path)
		}
		if str(g, "port") != "admin" || str(g, "scheme") != "HTTPS" {
			t.Errorf("%s asks port %v over %v, want the admin port over HTTPS", probe, get(g, "port"), get(g, "scheme"))
		}
	}
	if str(ferryd, "lifecycle", "preStop", "exec", "command", 1) == "" {
		t.Errorf("no preStop hook: %v", ferryd["lifecycle"])
	}
}

// mountsOf maps each mount path of a container to its volume's name.
func mountsOf(c any) map[string]string {
	out := map[string]string{}
	for _, m := range list(c, "volumeMounts") {
		out[str(m, "mountPath")] = str(m, "name")
	}
	return out
}

// checkVolumes checks that every mount names a volume, that the files
// ferryd and the init container are given lie under their mounts, and
// that every Secret and ConfigMap key a volume takes is rendered (or, for
// a Secret of the user's, named in the values).
func checkVolumes(t *testing.T, objs []object, sts object) {
	t.Helper()
	pod := get(sts, "spec", "template", "spec")
	volumes := map[string]any{}
	for _, v := range list(pod, "volumes") {
		volumes[str(v, "name")] = v
	}
	for _, c := range list(sts, "spec", "volumeClaimTemplates") {
		volumes[str(c, "metadata", "name")] = c
	}
	for _, field := range []string{"initContainers", "containers"} {
		for _, c := range list(pod, field) {
			for path, vol := range mountsOf(c) {
				if volumes[vol] == nil {
					t.Errorf("%s mounts %q at %s: no such volume", str(c, "name"), vol, path)
				}
			}
		}
	}
	ferryd := container(t, pod, "containers", "ferryd")
	mounts := mountsOf(ferryd)
	for _, env := range []string{"FERRY_TLS_CERT", "FERRY_TLS_KEY", "FERRY_TLS_CA", "FERRY_GOSSIP_KEYRING", "FERRY_TOKENS", "FERRY_DATA_DIR"} {
		v, ok := envValue(ferryd, env)
		if !ok || !underMount(v, mounts) {
			t.Errorf("%s=%q is not under a mount of ferryd (%v)", env, v, mounts)
		}
	}
	for _, v := range list(pod, "volumes") {
		if name := str(v, "secret", "secretName"); name != "" {
			checkKeys(t, objs, "Secret", name, list(v, "secret", "items"))
		}
		if name := str(v, "configMap", "name"); name != "" {
			checkKeys(t, objs, "ConfigMap", name, list(v, "configMap", "items"))
		}
	}
	init := container(t, pod, "initContainers", "node-certificate")
	if _, ok := mountsOf(init)["/etc/ferry/ca"]; !ok {
		t.Errorf("the init container does not mount the CA")
	}
	if _, ok := mounts["/etc/ferry/ca"]; ok {
		t.Errorf("ferryd mounts the CA key: only the init container may")
	}
}

func underMount(path string, mounts map[string]string) bool {
	for m := range mounts {
		if strings.HasPrefix(path, m+"/") {
			return true
		}
	}
	return false
}

// checkKeys checks that a rendered Secret or ConfigMap has the keys a
// volume takes. A Secret that is not rendered must be one a rendered
// cert-manager Certificate writes, or one of the user's.
func checkKeys(t *testing.T, objs []object, kind, name string, items []any) {
	t.Helper()
	for _, o := range ofKind(objs, "Certificate") {
		if kind != "Secret" || str(o, "spec", "secretName") != name {
			continue
		}
		for _, it := range items {
			if k := str(it, "key"); k != "tls.crt" && k != "tls.key" && k != "ca.crt" {
				t.Errorf("Secret %s, written by cert-manager, has no key %q", name, k)
			}
		}
		return
	}
	for _, o := range objs {
		if o["kind"] != kind || str(o, "metadata", "name") != name {
			continue
		}
		for _, it := range items {
			if get(o, "data", str(it, "key")) == nil {
				t.Errorf("%s %s has no key %q", kind, name, str(it, "key"))
			}
		}
		return
	}
	if kind == "ConfigMap" || !strings.HasPrefix(name, "user-") {
		t.Errorf("volume takes %s %q, which is not rendered", kind, name)
	}
}

// checkGracePeriod checks that the pods are given time for the preStop
// hook's longest wait and for ferryd's hand-over (at most 5 s) after it.
func checkGracePeriod(t *testing.T, objs []object, sts object) {
	t.Helper()
	script := str(find(t, objs, "ConfigMap", str(sts, "metadata", "name")+"-scripts"), "data", "prestop.sh")
	waits := 0
	for _, m := range regexp.MustCompile(`(?:--timeout (\d+)s node drain|deadline=\$\(\( \$\(date \+%s\) \+ (\d+) \)\))`).FindAllStringSubmatch(script, -1) {
		n, _ := strconv.Atoi(m[1] + m[2])
		waits += n
	}
	grace := num(sts, "spec", "template", "spec", "terminationGracePeriodSeconds")
	if waits == 0 || grace < waits+5+10 {
		t.Errorf("terminationGracePeriodSeconds %d: the preStop hook may wait %d s, then ferryd hands over for up to 5 s", grace, waits)
	}
}

func checkServiceMonitor(t *testing.T, objs []object, sm object, ferryd map[string]any) {
	t.Helper()
	var target object
	for _, svc := range ofKind(objs, "Service") {
		if labelsMatch(get(sm, "spec", "selector", "matchLabels"), get(svc, "metadata", "labels")) {
			if target != nil {
				t.Errorf("the ServiceMonitor selects two Services: each node would be scraped twice")
			}
			target = svc
		}
	}
	if target == nil {
		t.Fatalf("the ServiceMonitor selects no Service: %v", get(sm, "spec", "selector"))
	}
	if get(target, "spec", "publishNotReadyAddresses") != true {
		t.Errorf("the ServiceMonitor should scrape the headless Service (every node), not %s", str(target, "metadata", "name"))
	}
	ep := get(sm, "spec", "endpoints", 0)
	found := false
	for _, p := range list(target, "spec", "ports") {
		found = found || str(p, "name") == str(ep, "port") && str(p, "targetPort") == "admin"
	}
	if !found || str(ep, "path") != "/metrics" || str(ep, "scheme") != "https" {
		t.Errorf("ServiceMonitor endpoint %v: want the admin port, https, /metrics", ep)
	}
	tok := str(ep, "authorization", "credentials", "name")
	checkKeys(t, objs, "Secret", tok, []any{map[string]any{"key": str(ep, "authorization", "credentials", "key")}})
	checkKeys(t, objs, "Secret", str(ep, "tlsConfig", "ca", "secret", "name"), []any{map[string]any{"key": "tls.crt"}})
}

// secretData returns the decoded value of a rendered Secret's key.
func secretData(t *testing.T, objs []object, name, key string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(str(find(t, objs, "Secret", name), "data", key))
	if err != nil || len(b) == 0 {
		t.Fatalf("secret %s key %s: %v (%d bytes)", name, key, err, len(b))
	}
	return b
}

// TestChart_GeneratedSecretsAreWhatFerrydReads parses the generated
// Secrets as ferryd and its init container read them: the tokens file
// (with the admin and metrics tokens' hashes and the extra entries), the
// gossip keyring and an ECDSA CA.
func TestChart_GeneratedSecretsAreWhatFerrydReads(t *testing.T) {
	objs := renderObjects(t, "-f", "testdata/values-full.yaml")
	set, err := auth.Parse(secretData(t, objs, release+"-tokens", "tokens.json"))
	if err != nil {
		t.Fatalf("tokens.json: %v", err)
	}
	admin, ok := set.Lookup(strings.TrimSpace(string(secretData(t, objs, release+"-admin-token", "token"))))
	if !ok || !admin.ClusterAdmin {
		t.Errorf("the admin token is not a cluster admin of the tokens file: %+v", admin)
	}
	metrics, ok := set.Lookup(strings.TrimSpace(string(secretData(t, objs, release+"-metrics-token", "token"))))
	if !ok || !metrics.Metrics || metrics.ClusterAdmin {
		t.Errorf("the metrics token has not exactly the metrics permission: %+v", metrics)
	}
	if _, ok := set.ByName("orders-service"); !ok {
		t.Errorf("auth.extraTokens entry orders-service is missing from tokens.json")
	}
	keys, err := node.ParseGossipKeyring(string(secretData(t, objs, release+"-gossip", "keyring")))
	if err != nil || len(keys) != 1 || len(keys[0]) != 32 {
		t.Errorf("gossip keyring: %v, %d keys", err, len(keys))
	}
	certPEM, _ := pem.Decode(secretData(t, objs, release+"-ca", "tls.crt"))
	keyPEM, _ := pem.Decode(secretData(t, objs, release+"-ca", "tls.key"))
	if certPEM == nil || keyPEM == nil {
		t.Fatal("the CA Secret holds no PEM certificate or key")
	}
	ca, err := x509.ParseCertificate(certPEM.Bytes)
	if err != nil || !ca.IsCA {
		t.Fatalf("CA certificate: %v (IsCA %v)", err, ca != nil && ca.IsCA)
	}
	key, err := x509.ParseECPrivateKey(keyPEM.Bytes)
	if pub, ok := ca.PublicKey.(*ecdsa.PublicKey); err != nil || !ok || !key.PublicKey.Equal(pub) {
		t.Fatalf("CA key: %v, or not the certificate's", err)
	}
}
