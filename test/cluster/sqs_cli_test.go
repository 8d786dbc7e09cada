package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/sqs"
)

// awsCLIs returns the distinct aws executables to test: the one on PATH
// and Debian's /usr/bin/aws (which speaks the query protocol where newer
// ones speak JSON).
func awsCLIs() []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range []string{"aws", "/usr/bin/aws"} {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			real = p
		}
		if !seen[real] {
			seen[real] = true
			out = append(out, p)
		}
	}
	return out
}

// TestSQSWithCLI runs testdata/sqs-cli.sh with every AWS CLI found against
// an SQS endpoint of a 3-node cluster.
func TestSQSWithCLI(t *testing.T) {
	clis := awsCLIs()
	if len(clis) == 0 {
		t.Skip("SKIPPED: no aws executable on PATH or at /usr/bin/aws (.ci/run installs Debian's awscli); the AWS CLI suite did not run")
	}
	c := startSQSCluster(t, sqs.StaticCredentials{"AKIDCLI": sqsSecret})
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, c.ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, cli := range clis {
		t.Run(fmt.Sprintf("%d-%s", i, filepath.Base(filepath.Dir(cli))), func(t *testing.T) {
			ver, _ := exec.Command(cli, "--version").CombinedOutput()
			t.Logf("%s: %s", cli, strings.TrimSpace(string(ver)))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "testdata/sqs-cli.sh")
			cmd.Env = append(os.Environ(),
				"AWS_CLI="+cli, "ENDPOINT="+c.endpoints[i%len(c.endpoints)], "QUEUE=cli-"+string(rune('a'+i)),
				"AWS_CA_BUNDLE="+ca, "AWS_ACCESS_KEY_ID=AKIDCLI", "AWS_SECRET_ACCESS_KEY="+sqsSecret,
				"AWS_CONFIG_FILE="+filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"),
				"AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER=", "HOME="+dir)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "PASS") {
				t.Fatalf("%s: %v\n%s", cli, err, out)
			}
		})
	}
}
