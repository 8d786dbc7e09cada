package deploytest

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// repoRoot is the module's root, seen from this package's directory (where
// go test runs the tests).
const repoRoot = "../.."

// composeFile is the part of a compose file the tests read.
type composeFile struct {
	Name     string             `yaml:"name"`
	Services map[string]service `yaml:"services"`
	Networks map[string]network `yaml:"networks"`
	Volumes  map[string]any     `yaml:"volumes"`
}

// service is one service of a compose file.
type service struct {
	Image       string                    `yaml:"image"`
	Entrypoint  []string                  `yaml:"entrypoint"`
	Command     []string                  `yaml:"command"`
	Environment map[string]string         `yaml:"environment"`
	Volumes     []string                  `yaml:"volumes"`
	Networks    map[string]serviceNetwork `yaml:"networks"`
	NetworkMode string                    `yaml:"network_mode"`
	Ports       []string                  `yaml:"ports"`
	DependsOn   map[string]dependency     `yaml:"depends_on"`
}

// serviceNetwork is a service's place on a network.
type serviceNetwork struct {
	IPv4Address string `yaml:"ipv4_address"`
}

// dependency is one entry of a service's depends_on.
type dependency struct {
	Condition string `yaml:"condition"`
}

// network is a network of a compose file.
type network struct {
	IPAM struct {
		Config []struct {
			Subnet string `yaml:"subnet"`
		} `yaml:"config"`
	} `yaml:"ipam"`
}

// composeNode is a service of the compose file that runs ferryd: one with
// FERRY_ID in its environment.
type composeNode struct {
	service string
	id      string
	ip      netip.Addr // its fixed address on the network
	network string
	svc     service
}

// composeCluster is deploy/compose.yaml, read and sorted out.
type composeCluster struct {
	file    composeFile
	subnets map[string]netip.Prefix
	nodes   []composeNode // by id
	init    service       // the service running compose/init.sh
	initSh  string        // compose/init.sh's text
}

// loadCompose reads and sorts out deploy/compose.yaml; it fails the test
// on anything that is not there or does not parse.
func loadCompose(t *testing.T) composeCluster {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(repoRoot, "deploy/compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeCluster
	if err := yaml.Unmarshal(text, &c.file); err != nil {
		t.Fatalf("deploy/compose.yaml: %v", err)
	}
	c.subnets = map[string]netip.Prefix{}
	for name, n := range c.file.Networks {
		if len(n.IPAM.Config) != 1 {
			t.Fatalf("network %s: want one ipam config with a fixed subnet, have %d", name, len(n.IPAM.Config))
		}
		p, err := netip.ParsePrefix(n.IPAM.Config[0].Subnet)
		if err != nil {
			t.Fatalf("network %s: subnet: %v", name, err)
		}
		c.subnets[name] = p
	}
	inits := 0
	for name, svc := range c.file.Services {
		if slices.Contains(svc.Entrypoint, "/init/init.sh") {
			c.init = svc
			inits++
		}
		id, ok := svc.Environment["FERRY_ID"]
		if !ok {
			continue
		}
		c.nodes = append(c.nodes, nodeOf(t, name, id, svc))
	}
	if inits != 1 {
		t.Fatalf("want one service running /init/init.sh, have %d", inits)
	}
	sort.Slice(c.nodes, func(i, j int) bool { return c.nodes[i].id < c.nodes[j].id })
	sh, err := os.ReadFile(filepath.Join(repoRoot, "deploy/compose/init.sh"))
	if err != nil {
		t.Fatal(err)
	}
	c.initSh = string(sh)
	return c
}

// nodeOf sorts out the node service name: its one network and fixed IP.
func nodeOf(t *testing.T, name, id string, svc service) composeNode {
	t.Helper()
	if len(svc.Networks) != 1 {
		t.Fatalf("service %s: want exactly one network, have %d", name, len(svc.Networks))
	}
	n := composeNode{service: name, id: id, svc: svc}
	for net, sn := range svc.Networks {
		ip, err := netip.ParseAddr(sn.IPv4Address)
		if err != nil {
			t.Fatalf("service %s: networks.%s.ipv4_address %q: want a fixed IP: %v", name, net, sn.IPv4Address, err)
		}
		n.ip, n.network = ip, net
	}
	return n
}

// env is a variable of the node's environment, "" when unset.
func (n composeNode) env(key string) string { return n.svc.Environment[key] }

// Default ports of ferryd before -port-offset.
var defaultPorts = map[string]int{"raft": 7001, "client": 7101, "http": 7201, "gossip": 7301}

// listenAddrs are the addresses the node's ferryd listens on (and
// advertises), by role, as ferryd derives them from its environment.
func (n composeNode) listenAddrs(t *testing.T) map[string]netip.AddrPort {
	t.Helper()
	ip, err := netip.ParseAddr(n.env("FERRY_IP"))
	if err != nil {
		t.Fatalf("%s: FERRY_IP %q: %v", n.service, n.env("FERRY_IP"), err)
	}
	offset := 0
	if v := n.env("FERRY_PORT_OFFSET"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil {
			t.Fatalf("%s: FERRY_PORT_OFFSET %q: %v", n.service, v, err)
		}
	}
	out := map[string]netip.AddrPort{}
	for role, port := range defaultPorts {
		out[role] = netip.AddrPortFrom(ip, uint16(port+offset))
		if v := n.env("FERRY_" + strings.ToUpper(role) + "_ADDR"); v != "" {
			if out[role], err = netip.ParseAddrPort(v); err != nil {
				t.Fatalf("%s: FERRY_%s_ADDR %q: %v", n.service, strings.ToUpper(role), v, err)
			}
		}
	}
	if v := n.env("FERRY_SQS_ADDR"); v != "" {
		if out["sqs"], err = netip.ParseAddrPort(v); err != nil {
			t.Fatalf("%s: FERRY_SQS_ADDR %q: %v", n.service, v, err)
		}
	}
	return out
}

func TestCompose_ThreeNodesWithDistinctIDsAndFixedIPsInTheSubnet(t *testing.T) {
	c := loadCompose(t)
	if len(c.nodes) != 3 {
		t.Fatalf("want 3 node services (with FERRY_ID), have %d", len(c.nodes))
	}
	ids, ips := map[string]bool{}, map[netip.Addr]bool{}
	for _, n := range c.nodes {
		subnet, ok := c.subnets[n.network]
		switch {
		case ids[n.id]:
			t.Errorf("%s: FERRY_ID %s used twice", n.service, n.id)
		case ips[n.ip]:
			t.Errorf("%s: IP %s used twice", n.service, n.ip)
		case !ok:
			t.Errorf("%s: network %s is not declared with a subnet", n.service, n.network)
		case !subnet.Contains(n.ip) || n.ip == subnet.Masked().Addr() || n.ip == subnet.Masked().Addr().Next():
			t.Errorf("%s: IP %s is not a host address of the subnet %s (nor may it be the gateway, .1)", n.service, n.ip, subnet)
		case n.env("FERRY_IP") != n.ip.String():
			t.Errorf("%s: FERRY_IP %q, but its fixed address is %s: the node would advertise an address it does not have",
				n.service, n.env("FERRY_IP"), n.ip)
		}
		ids[n.id], ips[n.ip] = true, true
		if d, ok := n.svc.DependsOn[initService(t, c)]; !ok || d.Condition != "service_completed_successfully" {
			t.Errorf("%s: want depends_on the init service with condition service_completed_successfully, have %+v", n.service, n.svc.DependsOn)
		}
		if n.svc.Image != c.init.Image {
			t.Errorf("%s: image %q, the init service runs %q", n.service, n.svc.Image, c.init.Image)
		}
		if !slices.Contains(n.svc.Volumes, "pki:/pki:ro") || !slices.Contains(n.svc.Volumes, n.service+":/data") {
			t.Errorf("%s: volumes %v: want its own named volume %s at /data and pki:/pki:ro", n.service, n.svc.Volumes, n.service)
		}
		for _, v := range n.svc.Volumes {
			if name, _, _ := strings.Cut(v, ":"); c.file.Volumes == nil || !hasKey(c.file.Volumes, name) {
				t.Errorf("%s: volume %q is not a declared named volume", n.service, v)
			}
		}
	}
}

// initService is the name of the service that runs init.sh.
func initService(t *testing.T, c composeCluster) string {
	t.Helper()
	for name, svc := range c.file.Services {
		if slices.Contains(svc.Entrypoint, "/init/init.sh") {
			return name
		}
	}
	t.Fatal("no init service")
	return ""
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

func TestCompose_AddressesAgreeAcrossNodes(t *testing.T) {
	c := loadCompose(t)
	var gossip, clients []string
	for _, n := range c.nodes {
		a := n.listenAddrs(t)
		gossip = append(gossip, a["gossip"].String())
		clients = append(clients, a["client"].String())
		if a["sqs"].IsValid() && a["sqs"].Addr() != n.ip {
			t.Errorf("%s: FERRY_SQS_ADDR %s is not on the node's IP %s", n.service, a["sqs"], n.ip)
		}
	}
	for _, n := range c.nodes {
		if got := splitList(n.env("FERRY_JOIN")); !slices.Equal(got, gossip) {
			t.Errorf("%s: FERRY_JOIN %v, want every node's gossip address %v", n.service, got, gossip)
		}
		if got := splitList(n.env("FERRY_SERVERS")); !slices.Equal(got, clients) {
			t.Errorf("%s: FERRY_SERVERS %v (the CLI in its container), want every node's client address %v", n.service, got, clients)
		}
		if got := n.env("FERRY_BOOTSTRAP_EXPECT"); got != strconv.Itoa(len(c.nodes)) {
			t.Errorf("%s: FERRY_BOOTSTRAP_EXPECT %q, want %d", n.service, got, len(c.nodes))
		}
	}
}

func TestCompose_NodeCertificatesNameEveryNodeIPAndServiceName(t *testing.T) {
	c := loadCompose(t)
	hosts := splitList(c.init.Environment["PKI_HOSTS"])
	var ids []string
	for _, n := range c.nodes {
		ids = append(ids, n.id)
		for _, h := range []string{n.ip.String(), n.service} {
			if !slices.Contains(hosts, h) {
				t.Errorf("init PKI_HOSTS %v lacks %s (node %s): clients dialing it would refuse the certificate", hosts, h, n.id)
			}
		}
		for key, want := range map[string]string{
			"FERRY_TLS_CERT": "/pki/" + n.id + ".pem", "FERRY_TLS_KEY": "/pki/" + n.id + "-key.pem", "FERRY_TLS_CA": "/pki/ca.pem",
			"FERRY_TOKENS": "/pki/tokens.json", "FERRY_GOSSIP_KEYRING": "/pki/gossip.key",
			"FERRY_CA": "/pki/ca.pem", "FERRY_TOKEN_FILE": "/pki/admin.token",
		} {
			if got := n.env(key); got != want {
				t.Errorf("%s: %s %q, want %q (what init.sh writes)", n.service, key, got, want)
			}
		}
	}
	if got := splitList(c.init.Environment["PKI_NODES"]); !slices.Equal(got, ids) {
		t.Errorf("init PKI_NODES %v, want the node ids %v", got, ids)
	}
	for _, want := range []string{`ferryd dev-pki -dir "$dir" -nodes "$PKI_NODES" -hosts "$PKI_HOSTS"`, `-secret-file "$dir/admin.token"`,
		`"$dir/gossip.key"`, `-file "$dir/tokens.json"`} {
		if !strings.Contains(c.initSh, want) {
			t.Errorf("deploy/compose/init.sh does not contain %q", want)
		}
	}
}

func TestCompose_PublishedPortsAreThePortsNodesListenOn(t *testing.T) {
	c := loadCompose(t)
	hostPorts := map[string]string{}
	for _, n := range c.nodes {
		listen := n.listenAddrs(t)
		published := map[int]bool{}
		for _, p := range n.svc.Ports {
			hostIP, hostPort, containerPort, err := parsePort(p)
			if err != nil {
				t.Errorf("%s: ports: %v", n.service, err)
				continue
			}
			if other, dup := hostPorts[hostIP+":"+hostPort]; dup {
				t.Errorf("%s: host port %s:%s is published by %s too", n.service, hostIP, hostPort, other)
			}
			hostPorts[hostIP+":"+hostPort] = n.service
			published[containerPort] = true
			if !slices.ContainsFunc(mapValues(listen), func(a netip.AddrPort) bool { return int(a.Port()) == containerPort }) {
				t.Errorf("%s: publishes container port %d, which the node does not listen on (it listens on %v)", n.service, containerPort, listen)
			}
		}
		for _, role := range []string{"client", "http", "sqs"} {
			if a, ok := listen[role]; !ok || !published[int(a.Port())] {
				t.Errorf("%s: the %s port %v is not published (ports %v)", n.service, role, a, n.svc.Ports)
			}
		}
	}
}

// parsePort reads a short-syntax port mapping, [HOST_IP:]HOST_PORT:CONTAINER_PORT[/tcp].
func parsePort(s string) (hostIP, hostPort string, containerPort int, err error) {
	spec, proto, _ := strings.Cut(s, "/")
	if proto != "" && proto != "tcp" {
		return "", "", 0, fmt.Errorf("%q: only tcp ports are published", s)
	}
	parts := strings.Split(spec, ":")
	switch len(parts) {
	case 2:
		hostIP, hostPort = "0.0.0.0", parts[0]
	case 3:
		hostIP, hostPort = parts[0], parts[1]
	default:
		return "", "", 0, fmt.Errorf("%q: want HOST_PORT:CONTAINER_PORT, optionally after HOST_IP:", s)
	}
	containerPort, err = strconv.Atoi(parts[len(parts)-1])
	if err != nil {
		return "", "", 0, fmt.Errorf("%q: container port: %v", s, err)
	}
	return hostIP, hostPort, containerPort, nil
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func TestCompose_EveryVariableIsOneFerrydOrTheCLIAccepts(t *testing.T) {
	c := loadCompose(t)
	bins := hostBinaries(t)
	ferrydEnv := helpEnvNames(t, bins.ferryd, `\[(FERRY_[A-Z0-9_]+)\]`, "-h")
	cliEnv := helpEnvNames(t, bins.ferry, `\(env (FERRY_[A-Z0-9_]+)[;)]`, "--help")
	for _, n := range c.nodes {
		var flags []string
		for key, value := range n.svc.Environment {
			switch {
			case ferrydEnv[key]:
				flags = append(flags, "-"+strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(key, "FERRY_")), "_", "-")+"="+value)
			case cliEnv[key]:
			default:
				t.Errorf("%s: %s is neither a ferryd flag's variable (ferryd -h) nor the ferry CLI's (ferry --help)", n.service, key)
			}
		}
		sort.Strings(flags)
		// Flags are parsed, and their values checked, in order: -h last
		// stops ferryd once every value has been accepted.
		out, code := run(t, bins.ferryd, nil, append(flags, "-h")...)
		if code != 0 {
			t.Errorf("%s: ferryd %s -h: exit %d: %s", n.service, strings.Join(flags, " "), code, lastLines(out, 1))
		}
	}
}

// helpEnvNames runs bin with the help flag and collects the variable names
// that pattern's group matches in what it prints.
func helpEnvNames(t *testing.T, bin, pattern, helpFlag string) map[string]bool {
	t.Helper()
	out, code := run(t, bin, nil, helpFlag)
	if code != 0 {
		t.Fatalf("%s %s: exit %d: %s", bin, helpFlag, code, out)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(out, -1) {
		names[m[1]] = true
	}
	if len(names) < 3 {
		t.Fatalf("%s %s names only %d FERRY_* variables: has its help changed?\n%s", bin, helpFlag, len(names), out)
	}
	return names
}

// binaries are paths of ferryd, ferry and (in the image) busybox sh.
type binaries struct{ ferryd, ferry, sh string }

var (
	hostBinsOnce sync.Once
	hostBins     binaries
	hostBinsErr  error
)

// hostBinaries builds ferryd and ferry from this checkout, once per test
// binary, into testDir.
func hostBinaries(t *testing.T) binaries {
	t.Helper()
	hostBinsOnce.Do(func() {
		dir := filepath.Join(testDir, "host-bin")
		hostBins = binaries{ferryd: filepath.Join(dir, "ferryd"), ferry: filepath.Join(dir, "ferry")}
		cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/ferryd", "./cmd/ferry")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			hostBinsErr = fmt.Errorf("go build ferryd ferry: %v\n%s", err, out)
		}
	})
	if hostBinsErr != nil {
		t.Fatal(hostBinsErr)
	}
	return hostBins
}

// run runs bin with args and only env (plus PATH and HOME) for at most a
// minute, and returns its combined output and exit code.
func run(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	return out.String(), 0
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
