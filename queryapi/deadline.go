package queryapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// deadlineWriter gives every write of an answer to the client a deadline (--write-timeout): a
// client that stops reading makes the write fail once the socket's buffers are full and the
// deadline has passed, and the handler lets go of what the answer held (a full LIST's page and
// snapshot, a watch) instead of waiting forever. The deadline is per write call, not per answer:
// a watch idle for an hour, or a list of a million objects read steadily, is fine.
//
// Each write sets the deadline before and clears it after: over HTTP/2 a deadline left set
// resets the stream when it passes, written to or not, and over HTTP/1 it would outlive the
// request on a kept-alive connection. Every handler writes through gin's c.Writer (c.Data,
// c.JSON, http.ServeContent, the list and watch streams), so this one wrapper covers them all.
type deadlineWriter struct {
	gin.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func newDeadlineWriter(w gin.ResponseWriter, timeout time.Duration) *deadlineWriter {
	return &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
}

// arm and disarm ignore http.ErrNotSupported: a writer without deadlines (a test's recorder) has
// no client to wait for.
func (w *deadlineWriter) arm()    { _ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }
func (w *deadlineWriter) disarm() { _ = w.rc.SetWriteDeadline(time.Time{}) }

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.arm()
	defer w.disarm()
	return w.ResponseWriter.Write(b)
}

func (w *deadlineWriter) WriteString(s string) (int, error) {
	w.arm()
	defer w.disarm()
	return w.ResponseWriter.WriteString(s)
}

func (w *deadlineWriter) Flush() {
	w.arm()
	defer w.disarm()
	w.ResponseWriter.Flush()
}

// finish arms the deadline for what net/http writes once the handler has returned (the buffered
// rest of the answer, the end of a chunked body); the next request on the connection clears it
// with its first write.
func (w *deadlineWriter) finish() { w.arm() }

// Unwrap lets http.ResponseController reach the connection through this writer too.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
