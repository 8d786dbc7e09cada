package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// imageSizeMax bounds the image's size.
const imageSizeMax = 40_000_000

// imageUID is the image's user (and group).
const imageUID = "65532"

// containerEngine is $FERRY_ENGINE, else podman or buildah, whichever is
// installed; the test fails, saying how to install one, when neither is.
func containerEngine(t *testing.T) string {
	t.Helper()
	if e := os.Getenv("FERRY_ENGINE"); e != "" {
		if e != "podman" && e != "buildah" {
			t.Fatalf("FERRY_ENGINE=%s: want podman or buildah", e)
		}
		return e
	}
	for _, e := range []string{"podman", "buildah"} {
		if _, err := exec.LookPath(e); err == nil {
			return e
		}
	}
	t.Fatal("the image test needs podman or buildah to build the image: install one (Debian: apt-get install podman busybox-static)")
	return ""
}

// imageConfig is what the tests check of the image's configuration.
type imageConfig struct {
	User        string
	Env         []string
	Entrypoint  []string
	WorkingDir  string
	Volumes     map[string]struct{}
	Healthcheck struct{ Test []string }
	Size        int64
}

// buildImage runs scripts/image.sh to build the image under a name of its
// own, removed when the test ends, and returns the name and the script's
// output.
func buildImage(t *testing.T, engine string) (string, string) {
	t.Helper()
	name := fmt.Sprintf("localhost/ferry-deploytest:%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "scripts/image.sh")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "FERRY_IMAGE="+name, "FERRY_ENGINE="+engine, "FERRY_IMAGE_BUILD=local")
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() {
		rmi := exec.Command(engine, "rmi", "-f", name)
		if out, err := rmi.CombinedOutput(); err != nil {
			t.Logf("%s rmi %s: %v: %s", engine, name, err, out)
		}
	})
	if err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, lastLines(string(out), 30))
	}
	return name, string(out)
}

// inspectImage reads the image's configuration.
func inspectImage(t *testing.T, engine, image string) imageConfig {
	t.Helper()
	var cfg imageConfig
	switch engine {
	case "podman":
		out, err := exec.Command("podman", "image", "inspect", image).Output()
		if err != nil {
			t.Fatalf("podman image inspect: %v", err)
		}
		var list []struct {
			Config      imageConfig
			HealthCheck struct{ Test []string }
			Size        int64
		}
		if err := json.Unmarshal(out, &list); err != nil || len(list) != 1 {
			t.Fatalf("podman image inspect: %v: %s", err, out)
		}
		cfg = list[0].Config
		cfg.Size = list[0].Size
		if len(cfg.Healthcheck.Test) == 0 {
			cfg.Healthcheck = list[0].HealthCheck
		}
	default:
		out, err := exec.Command("buildah", "inspect", "--type", "image", image).Output()
		if err != nil {
			t.Fatalf("buildah inspect: %v", err)
		}
		var info struct {
			Docker struct{ Config imageConfig } `json:"Docker"`
		}
		if err := json.Unmarshal(out, &info); err != nil {
			t.Fatalf("buildah inspect: %v", err)
		}
		cfg = info.Docker.Config
		size, err := exec.Command("buildah", "images", "--format", "{{.Size}}", image).Output()
		if err != nil {
			t.Fatalf("buildah images: %v", err)
		}
		cfg.Size = parseHumanSize(t, strings.TrimSpace(string(size)))
	}
	return cfg
}

// parseHumanSize reads a size such as "23.4 MB".
func parseHumanSize(t *testing.T, s string) int64 {
	t.Helper()
	var v float64
	var unit string
	if _, err := fmt.Sscanf(s, "%g %s", &v, &unit); err != nil {
		t.Fatalf("image size %q: %v", s, err)
	}
	mult := map[string]float64{"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
	if mult == 0 {
		t.Fatalf("image size %q: unknown unit", s)
	}
	return int64(v * mult)
}

// exportRootfs copies the image's root file system into a new directory.
func exportRootfs(t *testing.T, engine, image string) string {
	t.Helper()
	dir := filepath.Join(testDir, "rootfs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("ferry-deploytest-%d", time.Now().UnixNano())
	var script string
	switch engine {
	case "podman":
		script = `podman create --name "$1" "$2" >/dev/null && podman export "$1" | tar -x -C "$3"; rc=$?; podman rm -f "$1" >/dev/null; exit $rc`
	default:
		script = `buildah from --name "$1" "$2" >/dev/null && m=$(buildah mount "$1") && cp -a "$m/." "$3"; rc=$?; buildah umount "$1" >/dev/null; buildah rm "$1" >/dev/null; exit $rc`
	}
	if out, err := exec.Command("sh", "-c", script, "export", name, image, dir).CombinedOutput(); err != nil {
		t.Fatalf("copying the image's files out: %v: %s", err, out)
	}
	return dir
}

func TestImage_ItsOwnBinariesRunTheComposeClusterOnLoopback(t *testing.T) {
	engine := containerEngine(t)
	c := loadCompose(t)
	image, out := buildImage(t, engine)
	t.Logf("scripts/image.sh: %s", lastLines(out, 1))
	cfg := inspectImage(t, engine, image)
	checkImageConfig(t, cfg)
	root := exportRootfs(t, engine, image)
	checkRootfs(t, root)

	lc := &loopbackCluster{
		c: c,
		bins: binaries{ferryd: filepath.Join(root, "usr/local/bin/ferryd"), ferry: filepath.Join(root, "usr/local/bin/ferry"),
			sh: filepath.Join(root, "bin/sh")},
		path:  filepath.Join(root, "usr/local/bin") + ":" + filepath.Join(root, "bin"),
		dir:   t.TempDir(),
		ipMap: pickLoopback(t, c),
	}
	// The health check runs as the image has it, from its file system.
	if len(cfg.Healthcheck.Test) < 2 || cfg.Healthcheck.Test[0] != "CMD" {
		t.Fatalf("HEALTHCHECK %v: want an exec form (CMD ...): the image has no shell-less alternative", cfg.Healthcheck.Test)
	}
	lc.hcArgs = append([]string{filepath.Join(root, cfg.Healthcheck.Test[1])}, cfg.Healthcheck.Test[2:]...)

	lc.runInit(t)
	if again := lc.runInit(t); strings.Contains(again, "created") {
		t.Errorf("init.sh run a second time made new material: %s", again)
	}
	lc.checkCertificates(t)
	lc.start(t)
	lc.healthy(t)
	lc.sendReceiveAck(t)
}

// checkImageConfig checks the image's user, entrypoint, volume, health
// check and size.
func checkImageConfig(t *testing.T, cfg imageConfig) {
	t.Helper()
	if cfg.User != imageUID+":"+imageUID {
		t.Errorf("image user %q, want %s:%s (non-root, numeric)", cfg.User, imageUID, imageUID)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/usr/local/bin/ferryd"}) {
		t.Errorf("entrypoint %v, want ferryd", cfg.Entrypoint)
	}
	if _, ok := cfg.Volumes["/data"]; !ok || !slices.Contains(cfg.Env, "FERRY_DATA_DIR=/data") {
		t.Errorf("volumes %v, env %v: want /data as a volume and FERRY_DATA_DIR=/data", cfg.Volumes, cfg.Env)
	}
	if !slices.Contains(cfg.Healthcheck.Test, "health") {
		t.Errorf("HEALTHCHECK %v: want ferry health (was the image built in the OCI format, which drops it?)", cfg.Healthcheck.Test)
	}
	if cfg.Size <= 0 || cfg.Size > imageSizeMax {
		t.Errorf("image size %d bytes, want at most %d", cfg.Size, imageSizeMax)
	}
	t.Logf("image: %.1f MB, user %s, entrypoint %v, health check %v", float64(cfg.Size)/1e6, cfg.User, cfg.Entrypoint, cfg.Healthcheck.Test)
}

// checkRootfs checks the image's users and its data and pki directories.
func checkRootfs(t *testing.T, root string) {
	t.Helper()
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(passwd), ":"+imageUID+":"+imageUID+":") {
		t.Errorf("/etc/passwd has no entry for uid %s:\n%s", imageUID, passwd)
	}
	for _, d := range []string{"data", "pki", "tmp"} {
		fi, err := os.Stat(filepath.Join(root, d))
		if err != nil || !fi.IsDir() {
			t.Errorf("/%s: %v, want a directory", d, err)
			continue
		}
		// Extracted as root, the files keep their owners: /data and /pki
		// must be the image user's, or ferryd could not write them.
		st, ok := fi.Sys().(*syscall.Stat_t)
		if d != "tmp" && ok && os.Geteuid() == 0 && fmt.Sprint(st.Uid) != imageUID {
			t.Errorf("/%s is owned by uid %d, want %s (the image's user)", d, st.Uid, imageUID)
		}
	}
}
