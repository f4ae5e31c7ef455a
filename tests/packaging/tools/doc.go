// Package tools anchors the module of the packaging programs: image (kubesearch's container image
// as an OCI layout and a `docker load` tarball, built without Docker) and chart (`helm lint` and
// `helm template` of charts/kubesearch through Helm's Go library). The checks themselves are the
// tests in tests/packaging and tests/e2e, which run these programs.
package tools
