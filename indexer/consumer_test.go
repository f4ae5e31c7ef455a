package indexer

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/kubesearch/kubesearch/internal/store"
)

func newDecodeConsumer() *consumer {
	return &consumer{metrics: newMetrics(), log: slog.New(slog.NewTextHandler(io.Discard, nil)), unversioned: map[store.Pair]bool{}}
}

// The consumer builds documents without checking the object's JSON again (buildDocument with
// objectValid), because envelope.Unmarshal refuses a message whose object is not valid JSON. This
// pins that: a broken object must be dead-lettered, never sent in a _bulk line.
func TestDecodeRefusesInvalidObject(t *testing.T) {
	const head = `{"v":1,"type":"ADDED","cluster":"c1","group":"","version":"v1","resource":"configmaps","kind":"ConfigMap",` +
		`"namespace":"ns","name":"a","uid":"u1","resourceVersion":"5","epoch":1,"observedAt":"2026-01-02T03:04:05Z","object":`
	const meta = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"5"}`
	for _, tc := range []struct{ name, object string }{
		{"raw line break in a string", meta + ",\"data\":{\"k\":\"line\nbreak\"}}"},
		{"trailing comma", meta + `,"data":{"k":"v",}}`},
		{"unquoted key", meta + `,data:{}}`},
		{"truncated", meta + `,"data":{"k":"v"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := newDecodeConsumer().decode(kafka.Message{Value: []byte(head + tc.object + "}")}, 0)
			if it.op != nil || it.dead == nil {
				t.Fatalf("decoded into an op (%v), want a dead letter", it.op != nil)
			}
			if it.dead.reason != ReasonMalformedEnvelope {
				t.Errorf("reason %q, want %q", it.dead.reason, ReasonMalformedEnvelope)
			}
		})
	}
	// The same object, valid, is indexed: the cases above fail for their JSON only.
	it := newDecodeConsumer().decode(kafka.Message{Value: []byte(head + meta + `,"data":{"k":"v"}}}`)}, 0)
	if it.dead != nil || it.op == nil {
		t.Fatalf("valid event not decoded: %+v", it.dead)
	}
	if strings.Contains(string(it.op.doc), "\n") {
		t.Errorf("document has a line break: %s", it.op.doc)
	}
}
