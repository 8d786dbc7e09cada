// Package deploytest holds the tests of the container deployment: the
// Containerfile's image (scripts/image.sh) and the three-node cluster of
// deploy/compose.yaml.
//
// The compose tests read deploy/compose.yaml and check that it describes a
// cluster ferryd can form: three nodes with distinct ids and fixed IPs in
// the network's subnet, FERRY_* variables that ferryd (or, for the CLI run
// in a node's container, ferry) knows, with values ferryd accepts, node
// certificates naming every node's IP, and published ports that the nodes
// listen on.
//
// The image test builds the image with podman or buildah, takes its root
// filesystem apart from the container runtime, and forms the compose
// file's cluster on loopback addresses with the image's own binaries, its
// busybox running the compose init script: it then checks the image's
// health check command and a send, receive and ack through the image's CLI.
package deploytest
