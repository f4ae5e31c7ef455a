package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// LocalOptions bound the memory of a Local log.
type LocalOptions struct {
	// RetainBytes is, per partition, how much of what every consumer group has committed stays
	// readable: followers starting a little behind the groups (the query API's watch cache) read it.
	// Default 4 MiB.
	RetainBytes int
	// MaxBacklogBytes is, per partition of a topic a group reads, how much may wait unconsumed
	// beyond RetainBytes before writes wait for the group: the log holds the backlog in memory, so
	// a fast producer and a slow consumer must not grow it without bound. Default 32 MiB.
	MaxBacklogBytes int
	// Dir, when set, keeps the compacted topics (the collectors' ledger) across restarts, one file
	// per partition: what a collector remembers of its members, so one removed while the process
	// was down is purged at the next start. The other topics need no keeping (see Local).
	Dir string
}

// Local is the standalone mode's event stream: an in-process, in-memory log with the semantics of
// Kafka that the components rely on — partitions chosen by key hash (kafka-go's Hash, so a key
// lands where it would in Kafka), offsets, consumer groups with committed offsets, compacted topics
// (cleanup.policy=compact keeps the last message of each key), message size limits (TooLarge). Its
// content does not survive the process: the standalone mode needs none of it after a restart,
// because every collector lists its members again at start, in a new epoch.
//
// One mutex guards everything; readers and blocked writers wait on a channel closed at every
// change. That is simple and far faster than the members the collectors read.
type Local struct {
	opts LocalOptions

	mu      sync.Mutex
	topics  map[string]*localTopic
	groups  map[string]*localGroup // by group + "\x00" + topic
	changed chan struct{}
	closed  bool
}

type localTopic struct {
	name     string
	compact  bool
	maxBytes int // max.message.bytes; 0 none
	parts    []*localPartition
	groups   []*localGroup
}

type localPartition struct {
	file  *os.File  // the compacted partition's file under LocalOptions.Dir; nil when not kept
	msgs  []Message // ascending offsets; gaps where compaction removed messages
	bytes int       // Size of msgs
	start int64     // the log start offset: below it, offsets are out of range
	end   int64     // the next offset
	keys  map[string]int64
}

type localGroup struct {
	committed map[int]int64
}

// NewLocal returns an empty log.
func NewLocal(o LocalOptions) *Local {
	if o.RetainBytes <= 0 {
		o.RetainBytes = 4 << 20
	}
	if o.MaxBacklogBytes <= 0 {
		o.MaxBacklogBytes = 32 << 20
	}
	return &Local{opts: o, topics: map[string]*localTopic{}, groups: map[string]*localGroup{}, changed: make(chan struct{})}
}

var _ Broker = (*Local)(nil)

// notifyLocked wakes every reader and writer waiting for a change.
func (l *Local) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// wait releases the lock until the log changes, ctx is done or done is closed, and takes it again.
func (l *Local) wait(ctx context.Context, done <-chan struct{}) error {
	ch := l.changed
	l.mu.Unlock()
	defer l.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return io.EOF
	}
}

// Close ends every wait (readers return io.EOF) and closes the files of kept topics.
func (l *Local) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	l.notifyLocked()
	for _, t := range l.topics {
		for _, p := range t.parts {
			if p.file != nil {
				p.file.Close()
			}
		}
	}
}

func unknownTopic(topic string) error {
	return fmt.Errorf("topic %s: %w", topic, kafka.UnknownTopicOrPartition)
}

// EnsureTopic is CreateTopic: the local log is never away.
func (l *Local) EnsureTopic(ctx context.Context, t Topic) error { return l.CreateTopic(ctx, t) }

// CreateTopic creates the topic; one that exists is left as it is.
func (l *Local) CreateTopic(_ context.Context, t Topic) error {
	if t.Name == "" || t.Partitions < 1 {
		return fmt.Errorf("create topic %q with %d partitions: want a name and at least one partition", t.Name, t.Partitions)
	}
	maxBytes := 0
	if v, ok := t.Config["max.message.bytes"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("create topic %s: max.message.bytes %q: want a positive integer", t.Name, v)
		}
		maxBytes = n
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.topics[t.Name]; ok {
		return nil
	}
	lt := &localTopic{name: t.Name, compact: t.Config["cleanup.policy"] == "compact", maxBytes: maxBytes}
	for i := range t.Partitions {
		p := &localPartition{keys: map[string]int64{}}
		if lt.compact && l.opts.Dir != "" {
			if err := p.keep(filepath.Join(l.opts.Dir, fmt.Sprintf("%s-%d.log", t.Name, i))); err != nil {
				for _, q := range lt.parts {
					q.file.Close()
				}
				return fmt.Errorf("create topic %s: %w", t.Name, err)
			}
		}
		lt.parts = append(lt.parts, p)
	}
	l.topics[t.Name] = lt
	for key, g := range l.groups {
		if strings.HasSuffix(key, "\x00"+t.Name) {
			lt.groups = append(lt.groups, g)
		}
	}
	l.notifyLocked()
	return nil
}

// TopicMaxMessageBytes is the topic's max.message.bytes; 0 when it was created without one.
func (l *Local) TopicMaxMessageBytes(_ context.Context, topic string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.topics[topic]
	if !ok {
		return 0, unknownTopic(topic)
	}
	return t.maxBytes, nil
}

// Spans is what each partition holds.
func (l *Local) Spans(_ context.Context, topic string) (map[int]Span, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.topics[topic]
	if !ok {
		return nil, unknownTopic(topic)
	}
	out := make(map[int]Span, len(t.parts))
	for i, p := range t.parts {
		out[i] = Span{First: p.start, End: p.end}
	}
	return out, nil
}

// HighWaterMarks is each partition's end.
func (l *Local) HighWaterMarks(ctx context.Context, topic string) (map[int]int64, error) {
	spans, err := l.Spans(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[int]int64, len(spans))
	for p, s := range spans {
		out[p] = s.End
	}
	return out, nil
}

// CommittedOffsets is what the group committed per partition, -1 where nothing.
func (l *Local) CommittedOffsets(_ context.Context, group, topic string) (map[int]int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.topics[topic]
	if !ok {
		return nil, unknownTopic(topic)
	}
	out := make(map[int]int64, len(t.parts))
	for i := range t.parts {
		out[i] = -1
	}
	if g := l.groups[group+"\x00"+topic]; g != nil {
		for p, o := range g.committed {
			out[p] = o
		}
	}
	return out, nil
}

// CommitOffsets implements Broker: the group counts for the topic's retention like any other.
func (l *Local) CommitOffsets(_ context.Context, group, topic string, offsets map[int]int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.topics[topic]
	if !ok {
		return unknownTopic(topic)
	}
	key := group + "\x00" + topic
	g := l.groups[key]
	if g == nil {
		g = &localGroup{committed: map[int]int64{}}
		l.groups[key] = g
		t.groups = append(t.groups, g)
	}
	for p, o := range offsets {
		if p < 0 || p >= len(t.parts) {
			return fmt.Errorf("commit offset of group %s on %s/%d: no such partition", group, topic, p)
		}
		g.committed[p] = max(g.committed[p], o)
		l.trimLocked(t, p)
	}
	l.notifyLocked()
	return nil
}

// ReadPartition returns a copy of what the partition holds; a topic not created yet holds nothing.
func (l *Local) ReadPartition(_ context.Context, topic string, partition int) ([]Message, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.topics[topic]
	if !ok {
		return nil, nil
	}
	if partition < 0 || partition >= len(t.parts) {
		return nil, fmt.Errorf("topic %s has no partition %d: %w", topic, partition, kafka.UnknownTopicOrPartition)
	}
	p := t.parts[partition]
	out := slices.Clone(p.msgs)
	for i := range out {
		out[i].HighWaterMark = p.end
	}
	return out, nil
}

// index is the position in p.msgs of the first message at offset o or after.
func (p *localPartition) index(o int64) int {
	return sort.Search(len(p.msgs), func(i int) bool { return p.msgs[i].Offset >= o })
}

// append adds m at the partition's end; in a compacted topic it replaces the key's older message.
func (p *localPartition) append(m Message, compact bool) {
	m.Offset = p.end
	p.end++
	if compact {
		if old, ok := p.keys[string(m.Key)]; ok {
			if i := p.index(old); i < len(p.msgs) && p.msgs[i].Offset == old {
				p.bytes -= p.msgs[i].Size()
				p.msgs = slices.Delete(p.msgs, i, i+1)
			}
		}
		p.keys[string(m.Key)] = m.Offset
	}
	p.msgs = append(p.msgs, m)
	p.bytes += m.Size()
}

// keep loads the partition from its file, rewrites the file compacted and keeps it open to append
// every message written from now on. A record is its offset, time, key and value, with uvarint
// lengths (a value's length plus one, 0 being a tombstone); headers are not kept (ledger records
// have none). A torn last record (the process killed mid-write) is dropped.
func (p *localPartition) keep(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for len(data) > 0 {
		m, n := decodeRecord(data)
		if n == 0 {
			break
		}
		data = data[n:]
		p.end = m.Offset
		p.append(m, true)
	}
	var buf []byte
	for _, m := range p.msgs {
		buf = appendRecord(buf, &m)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	p.file, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	return err
}

func appendRecord(b []byte, m *Message) []byte {
	b = binary.AppendUvarint(b, uint64(m.Offset))
	b = binary.AppendVarint(b, m.Time.UnixNano())
	b = binary.AppendUvarint(b, uint64(len(m.Key)))
	b = append(b, m.Key...)
	if m.Value == nil {
		return binary.AppendUvarint(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Value))+1)
	return append(b, m.Value...)
}

// decodeRecord decodes the record at the start of b and its length; 0 when b holds no whole record.
func decodeRecord(b []byte) (Message, int) {
	var m Message
	i := 0
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b[i:])
		i += n
		return v, n > 0
	}
	off, ok := next()
	if !ok {
		return m, 0
	}
	t, n := binary.Varint(b[i:])
	if n <= 0 {
		return m, 0
	}
	i += n
	klen, ok := next()
	if !ok || uint64(len(b)-i) < klen {
		return m, 0
	}
	m.Key = slices.Clone(b[i : i+int(klen)])
	i += int(klen)
	vlen, ok := next()
	if !ok || uint64(len(b)-i) < max(vlen, 1)-1 {
		return m, 0
	}
	if vlen > 0 {
		m.Value = slices.Clone(b[i : i+int(vlen-1)])
		i += int(vlen - 1)
	}
	m.Offset, m.Time = int64(off), time.Unix(0, t)
	return m, i
}

// floor is the lowest offset a group of t still needs in partition i: everything below it may be
// trimmed. A group that has committed nothing there needs everything; without groups nothing is
// needed but what RetainBytes keeps.
func (t *localTopic) floor(i int) int64 {
	floor := t.parts[i].end
	for _, g := range t.groups {
		c, ok := g.committed[i]
		if !ok {
			return t.parts[i].start
		}
		floor = min(floor, c)
	}
	return floor
}

// trim drops, from the front of partition i, messages every group has committed, while more than
// RetainBytes would stay. Compacted topics keep everything: they hold one message per key.
func (l *Local) trimLocked(t *localTopic, i int) {
	if t.compact {
		return
	}
	p := t.parts[i]
	floor := t.floor(i)
	n := 0
	for n < len(p.msgs) && p.msgs[n].Offset < floor && p.bytes > l.opts.RetainBytes {
		p.bytes -= p.msgs[n].Size()
		n++
	}
	if n > 0 {
		p.start = p.msgs[n-1].Offset + 1
		p.msgs = slices.Delete(p.msgs, 0, n)
	}
}

// backlogged says whether writes to partition i must wait for the topic's groups.
func (l *Local) backlogged(t *localTopic, i int) bool {
	return !t.compact && len(t.groups) > 0 && t.parts[i].bytes > l.opts.RetainBytes+l.opts.MaxBacklogBytes
}

type localWriter struct {
	l          *Local
	topic      string
	batchBytes int
}

// NewWriter returns a writer of the log.
func (l *Local) NewWriter(o WriterOptions) Writer {
	if o.BatchBytes <= 0 {
		o.BatchBytes = 1 << 20
	}
	return &localWriter{l: l, topic: o.Topic, batchBytes: o.BatchBytes}
}

func (w *localWriter) SetBatchBytes(n int) { w.batchBytes = n }
func (w *localWriter) Close() error        { return nil }

// Write appends msgs in order. A message larger than BatchBytes or its topic's max.message.bytes,
// or for a topic that does not exist, fails alone (WriteErrors), as Kafka fails it; it waits while
// a partition's backlog is full.
func (w *localWriter) Write(ctx context.Context, msgs ...Message) error {
	l := w.l
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs WriteErrors
	fail := func(i int, err error) {
		if errs == nil {
			errs = make(WriteErrors, len(msgs))
		}
		errs[i] = err
	}
	now := time.Now()
	balancer := &kafka.Hash{}
	for i := range msgs {
		m := msgs[i]
		if m.Topic == "" {
			m.Topic = w.topic
		}
		if l.closed {
			return errors.New("write: the local log is closed")
		}
		t, ok := l.topics[m.Topic]
		if !ok {
			fail(i, unknownTopic(m.Topic))
			continue
		}
		if size := m.Size(); size > w.batchBytes || (t.maxBytes > 0 && size > t.maxBytes) {
			fail(i, fmt.Errorf("message of %d bytes to topic %s: %w", size, m.Topic, kafka.MessageSizeTooLarge))
			continue
		}
		part := balancer.Balance(kafka.Message{Key: m.Key}, partitionIDs(len(t.parts))...)
		for l.backlogged(t, part) {
			l.trimLocked(t, part)
			if !l.backlogged(t, part) {
				break
			}
			if err := l.wait(ctx, nil); err != nil {
				return fmt.Errorf("write to topic %s: waiting for its consumers: %w", m.Topic, err)
			}
			if l.closed {
				return errors.New("write: the local log is closed")
			}
		}
		m.Partition, m.HighWaterMark = part, 0
		if m.Time.IsZero() {
			m.Time = now
		}
		m.Key, m.Value, m.Headers = slices.Clone(m.Key), slices.Clone(m.Value), slices.Clone(m.Headers)
		p := t.parts[part]
		p.append(m, t.compact)
		if p.file != nil {
			// Unsynced: a killed process loses nothing written (the page cache has it); only a
			// machine crash could lose the last records, which the next start writes again.
			last := p.msgs[len(p.msgs)-1]
			if _, err := p.file.Write(appendRecord(nil, &last)); err != nil {
				fail(i, fmt.Errorf("keep topic %s: %w", m.Topic, err))
			}
		}
		l.trimLocked(t, part)
	}
	l.notifyLocked()
	if errs != nil {
		return errs
	}
	return nil
}

func partitionIDs(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	return ids
}

type localGroupReader struct {
	l      *Local
	topic  string
	group  *localGroup
	pos    map[int]int64 // per partition, the next offset to fetch
	next   int           // the partition to look at first: partitions take turns
	mu     sync.Mutex    // one Fetch at a time
	done   chan struct{}
	closer sync.Once
}

// NewGroupReader returns the reader of a group. Every reader of a group reads every partition: the
// local log has one process, so one member.
func (l *Local) NewGroupReader(cfg GroupReaderConfig) (GroupReader, error) {
	if cfg.Topic == "" || cfg.Group == "" {
		return nil, fmt.Errorf("reader of topic %q in group %q: want a topic and a group", cfg.Topic, cfg.Group)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	key := cfg.Group + "\x00" + cfg.Topic
	g := l.groups[key]
	if g == nil {
		// The group holds back trimming from now on, even before it commits.
		g = &localGroup{committed: map[int]int64{}}
		l.groups[key] = g
		if t := l.topics[cfg.Topic]; t != nil {
			t.groups = append(t.groups, g)
		}
	}
	return &localGroupReader{l: l, topic: cfg.Topic, group: g, done: make(chan struct{})}, nil
}

func (r *localGroupReader) Fetch(ctx context.Context) (Message, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		select {
		case <-r.done:
			return Message{}, io.EOF
		default:
		}
		if l.closed {
			return Message{}, io.EOF
		}
		if t := l.topics[r.topic]; t != nil {
			if r.pos == nil {
				r.pos = map[int]int64{}
				for i, p := range t.parts {
					r.pos[i] = p.start
					if c, ok := r.group.committed[i]; ok {
						r.pos[i] = max(c, p.start)
					}
				}
			}
			for k := range t.parts {
				i := (r.next + k) % len(t.parts)
				p := t.parts[i]
				if r.pos[i] < p.start {
					r.pos[i] = p.start // trimmed below a position no commit protected: Kafka's "earliest" reset
				}
				if j := p.index(r.pos[i]); j < len(p.msgs) {
					m := p.msgs[j]
					m.HighWaterMark = p.end
					r.pos[i] = m.Offset + 1
					r.next = i + 1
					return m, nil
				}
			}
		}
		if err := l.wait(ctx, r.done); err != nil {
			if errors.Is(err, io.EOF) {
				return Message{}, io.EOF
			}
			return Message{}, fmt.Errorf("fetch from topic %s: %w", r.topic, err)
		}
	}
}

func (r *localGroupReader) Commit(_ context.Context, msgs ...Message) error {
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-r.done:
		return io.EOF
	default:
	}
	t := l.topics[r.topic]
	for _, m := range msgs {
		if m.Offset+1 > r.group.committed[m.Partition] {
			r.group.committed[m.Partition] = m.Offset + 1
		}
		if t != nil && m.Partition < len(t.parts) {
			l.trimLocked(t, m.Partition)
		}
	}
	l.notifyLocked() // writers waiting for the backlog
	return nil
}

func (r *localGroupReader) Close() error {
	r.closer.Do(func() { close(r.done) })
	return nil
}

type localFollower struct {
	l   *Local
	cfg FollowerConfig
}

// NewFollower returns a follower of the log.
func (l *Local) NewFollower(cfg FollowerConfig) (Follower, error) {
	if cfg.Topic == "" {
		return nil, errors.New("follower: no topic")
	}
	return &localFollower{l: l, cfg: cfg}, nil
}

// Run delivers each partition's messages in offset order, partitions taking turns; it waits for the
// topic to exist.
func (f *localFollower) Run(ctx context.Context, handle func(ctx context.Context, m Message) error) error {
	l := f.l
	var (
		pos   map[int]int64
		batch []Message
	)
	for {
		l.mu.Lock()
		batch = batch[:0]
		for len(batch) == 0 && !l.closed && ctx.Err() == nil {
			t := l.topics[f.cfg.Topic]
			if t != nil && pos == nil {
				var err error
				if pos, err = f.starts(t); err != nil {
					l.mu.Unlock()
					return err
				}
			}
			if t != nil {
				for i, p := range t.parts {
					if pos[i] < p.start {
						l.mu.Unlock()
						return fmt.Errorf("follow topic %s partition %d: offset %d is no longer held (from %d): %w",
							f.cfg.Topic, i, pos[i], p.start, kafka.OffsetOutOfRange)
					}
					// A bounded slice of each partition, so one busy partition does not starve the others.
					for j, n := p.index(pos[i]), 0; j < len(p.msgs) && n < 256; j, n = j+1, n+1 {
						m := p.msgs[j]
						m.HighWaterMark = p.end
						batch = append(batch, m)
						pos[i] = m.Offset + 1
					}
				}
			}
			if len(batch) == 0 {
				if err := l.wait(ctx, nil); err != nil {
					break
				}
			}
		}
		l.mu.Unlock()
		if ctx.Err() != nil || len(batch) == 0 {
			return nil // ctx done or the log closed
		}
		for _, m := range batch {
			if err := handle(ctx, m); err != nil {
				return err
			}
		}
	}
}

// starts resolves the configured start offsets against what t holds.
func (f *localFollower) starts(t *localTopic) (map[int]int64, error) {
	spans := make(map[int]Span, len(t.parts))
	for i, p := range t.parts {
		spans[i] = Span{First: p.start, End: p.end}
	}
	return resolveStarts(f.cfg, spans)
}
