package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// The metrics server drops a client that stalls: one that never finishes
// its request headers (read-header timeout), one that stays idle after an
// answer (idle timeout); a client that behaves gets its answer.
func TestServerTimeouts(t *testing.T) {
	short := timeouts{readHeader: 200 * time.Millisecond, read: 300 * time.Millisecond, write: time.Second, idle: 300 * time.Millisecond}
	if serverTimeouts.readHeader <= 0 || serverTimeouts.read <= 0 || serverTimeouts.write <= 0 || serverTimeouts.idle <= 0 {
		t.Fatalf("serverTimeouts %+v: every timeout must be set", serverTimeouts)
	}
	tests := []struct {
		name  string
		send  string // what the client writes, then it stalls
		reply bool   // an answer is expected before the close
	}{
		{"headers never finished", "GET /health-check HTTP/1.1\r\nHost: x\r\n", false},
		{"idle after an answer", "GET /health-check HTTP/1.1\r\nHost: x\r\n\r\n", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("OK")) }), short)
			go func() { _ = srv.Serve(l) }()
			defer srv.Close()
			conn, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tc.send); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			start := time.Now()
			br := bufio.NewReader(conn)
			if tc.reply {
				resp, err := http.ReadResponse(br, nil)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("answer: %v %v", resp, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
			}
			// The server closes the connection: EOF well before the
			// client's own 5s deadline.
			_, err = io.Copy(io.Discard, br)
			if err != nil || time.Since(start) > 3*time.Second {
				t.Errorf("connection not closed by the server: %v after %s", err, time.Since(start))
			}
		})
	}
}
