package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// newClient is the one HTTP client every scenario uses against every server:
// keep-alive, enough idle connections for the widest concurrency.
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}}
}

// answer is a decoded toolfs-api reply.
type answer struct {
	status   int
	Output   string          `json:"output"`
	Metadata json.RawMessage `json:"metadata"`
	Code     string          `json:"code"`
}

// call posts a tool request and decodes the answer (success or problem).
func call(ctx context.Context, c *http.Client, base, tool, session string, body any) (answer, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/tools/"+tool, bytes.NewReader(b))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Session-ID", session)
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode}
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("%s: status %d, undecodable body %.200q", tool, resp.StatusCode, raw)
	}
	return a, nil
}

// mustOK is call that turns anything but 200 into an error.
func mustOK(ctx context.Context, c *http.Client, base, tool, session string, body any) (answer, error) {
	a, err := call(ctx, c, base, tool, session, body)
	if err == nil && a.status != http.StatusOK {
		err = fmt.Errorf("%s: status %d %s: %s", tool, a.status, a.Code, a.Output)
	}
	return a, err
}

// fetch sends a prepared request and discards the body, checking the status
// and the body size (a short or failed answer must not pass as fast).
func fetch(c *http.Client, req *http.Request, minBytes int64) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || n < minBytes {
		return fmt.Errorf("%s %s: status %d, %d bytes (want 200, >= %d)", req.Method, req.URL.Path, resp.StatusCode, n, minBytes)
	}
	return nil
}

// latencies are the durations of one run's requests plus its wall time.
type latencies struct {
	d    []time.Duration
	wall time.Duration
}

func (l latencies) perSecond() float64 { return float64(len(l.d)) / l.wall.Seconds() }

// quantile is the q-quantile (nearest rank) of the sorted durations.
func (l latencies) quantile(q float64) time.Duration {
	if len(l.d) == 0 {
		return 0
	}
	i := int(q*float64(len(l.d))+0.5) - 1
	return l.d[min(max(i, 0), len(l.d)-1)]
}

func (l latencies) mean() time.Duration {
	if len(l.d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range l.d {
		sum += d
	}
	return sum / time.Duration(len(l.d))
}

// closedLoop runs op on conns workers for dur (each starts its next request
// when the last one ends) and returns every request's latency. The first
// error stops the run.
func closedLoop(ctx context.Context, conns int, dur time.Duration, op func(worker, i int) error) (latencies, error) {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var (
		mu    sync.Mutex
		all   []time.Duration
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; i == 0 || ctx.Err() == nil; i++ { // at least one request, however slow the machine
				t := time.Now()
				if err := op(w, i); err != nil {
					mu.Lock()
					if first == nil && ctx.Err() == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					break
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	l := latencies{d: all, wall: time.Since(start)}
	slices.Sort(l.d)
	if first != nil {
		return l, first
	}
	if len(l.d) == 0 {
		return l, fmt.Errorf("no request finished within %v", dur)
	}
	return l, nil
}

// sequential times n calls of op one after another.
func sequential(n int, op func(i int) error) (latencies, error) {
	l := latencies{d: make([]time.Duration, 0, n)}
	start := time.Now()
	for i := range n {
		t := time.Now()
		if err := op(i); err != nil {
			return l, err
		}
		l.d = append(l.d, time.Since(t))
	}
	l.wall = time.Since(start)
	slices.Sort(l.d)
	return l, nil
}

// ms formats a duration in milliseconds with 3 significant-ish digits.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func ratio(a, b float64) string { return strconv.FormatFloat(a/b, 'f', 2, 64) + "x" }

func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

// verdict says whether a goal was met.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// withCPU runs a measurement and also returns the server's CPU time per
// request during it.
func withCPU(srv *server, run func() (latencies, error)) (latencies, time.Duration, error) {
	before, err := cpuOf(srv.pid)
	if err != nil {
		return latencies{}, 0, err
	}
	l, err := run()
	if err != nil {
		return l, 0, err
	}
	after, err := cpuOf(srv.pid)
	if err != nil || len(l.d) == 0 {
		return l, 0, err
	}
	return l, (after - before) / time.Duration(len(l.d)), nil
}

// us formats a duration in whole microseconds.
func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }
