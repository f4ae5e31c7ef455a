// Package auth authenticates the requests of the query API and its Kubernetes-compatible facade the
// way a kube-apiserver does, so that kubeconfigs and tools written for Kubernetes just work:
//
//   - bearer tokens from a token file (--token-auth-file), kube-apiserver's CSV format;
//   - client certificates signed by the client CA (--client-ca-file): CN is the user, O the groups;
//   - bearer tokens reviewed by a cluster's TokenReview API (--authentication-kubeconfig), cached
//     briefly, so the platform's ServiceAccount and OIDC tokens work too; a bounded number of
//     reviews at once, tokens accepted before in a lane of their own, so a flood of random tokens
//     is refused (ErrThrottled) without delaying the valid ones;
//   - anonymous access, only when explicitly enabled.
//
// The answer is who is asking (User), with Kubernetes' conventions for names and groups. What that
// user may see is package authz's; how a rejection is rendered (a 401, 429 or 503 Status) and which
// requests get only known credentials judged (KnownOnly) are the server's.
// Credentials never appear in errors or logs: the token file is held as SHA-256 hashes, and the
// review cache is keyed by them.
package auth
