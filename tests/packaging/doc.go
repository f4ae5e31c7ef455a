// Package packaging checks how kubesearch is shipped, without Docker or a cluster: the container image
// assembled by tools/image (its OCI layout and `docker load` tarball read back by hand, the binary in
// its layer run), the Dockerfile and .dockerignore agreeing with it, the docker-compose.yml wiring
// against `kubesearch <command> --help` and the repository, and the Helm chart (lint, golden renders,
// security and probe invariants, flags against --help). What needs services — the rendered manifests
// sent to a kube-apiserver, the collector run with the chart's RBAC, `docker-compose config` — is in
// tests/e2e/packaging_test.go.
//
// The programs needing large libraries (go-containerregistry, Helm) live in the separate module
// tools/, so neither the product binary nor this module depends on them.
package packaging
