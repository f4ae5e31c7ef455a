package queryapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/store"
)

// The fleet poll presents the token of --collector-status-token-file to the collectors' /status,
// read again at every poll, so a rotated token is sent without a restart.
func TestFleetPollSendsCollectorStatusToken(t *testing.T) {
	var (
		mu       sync.Mutex
		accepted = "first-token"
		seen     []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != "Bearer "+accepted {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"items": []registry.ResourceStatus{
			{Registry: "r", Cluster: "member1", Resource: "pods", Kind: "Pod", State: registry.StateRunning, ResourceVersion: "7"}}})
	}))
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken := func(token string) {
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeToken("first-token")
	client, err := newStatusClient(tokenFile, "")
	if err != nil {
		t.Fatal(err)
	}
	newFleet := func(tokenFile string) *fleet {
		return &fleet{
			readWatermarks: func(context.Context) ([]store.Watermark, error) { return nil, nil },
			collectors:     []string{srv.URL + "/status"}, client: client, tokenFile: tokenFile,
			interval: time.Second, staleAfter: 30 * time.Second, log: slog.New(slog.DiscardHandler), now: time.Now,
		}
	}
	polled := func(t *testing.T, f *fleet) (state string, collErr error) {
		t.Helper()
		f.poll(t.Context())
		pairs := f.pairs(nil)
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(pairs) != 1 {
			return "", f.collErrs[srv.URL+"/status"]
		}
		return pairs[0].State, f.collErrs[srv.URL+"/status"]
	}

	f := newFleet(tokenFile)
	if state, err := polled(t, f); state != registry.StateRunning || err != nil {
		t.Errorf("with the token: state %q, collector error %v; want Running", state, err)
	}
	// The Secret is updated: the next poll sends the new token.
	mu.Lock()
	accepted = "second-token"
	mu.Unlock()
	writeToken("second-token")
	if state, err := polled(t, f); state != registry.StateRunning || err != nil {
		t.Errorf("after rotation: state %q, collector error %v; want Running", state, err)
	}
	if _, err := polled(t, newFleet("")); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without a token file: collector error %v, want the 401", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"Bearer first-token", "Bearer second-token", ""}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("Authorization headers %q, want %q", seen, want)
	}
}

// A token file that cannot be read is an error at start, naming the flag, not at the first poll.
func TestStatusClientChecksFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := newStatusClient(filepath.Join(dir, "missing-token"), filepath.Join(dir, "missing-ca.pem"))
	if err == nil || !strings.Contains(err.Error(), "--collector-status-token-file") || !strings.Contains(err.Error(), "--collector-status-ca-file") {
		t.Errorf("newStatusClient with missing files: %v, want errors naming both flags", err)
	}
}
