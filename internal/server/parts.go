package server

import (
	"log/slog"
	"sync"
)

// parts are what New made that holds something (goroutines, descriptors,
// connections), in the order it made them. Each is closed once, in the
// reverse order: by New itself when a later step fails, so a start-up that
// fails half way leaves nothing behind, or by Shutdown after the drain
// (docs/architecture.md, "Start-up and shutdown"). Later parts use earlier
// ones (the readiness checks ping the Redis client, the watcher reads
// through the provider), so none is closed while another still uses it.
type parts struct {
	mu   sync.Mutex
	list []part
}

// part is one thing New made, named for the log, and how to let it go.
type part struct {
	name  string
	close func() error
}

// add records a part made now and returns its close, which runs once
// however often it is called (the drain ends some parts early: the
// approvals, the MCP streams, the change feed).
func (p *parts) add(name string, close func() error) func() error {
	once := sync.OnceValue(close)
	p.mu.Lock()
	p.list = append(p.list, part{name, once})
	p.mu.Unlock()
	return once
}

// closeAll closes every part in the reverse order of making, each once,
// logging a failure with the part's name.
func (p *parts) closeAll(log *slog.Logger) {
	p.mu.Lock()
	list := p.list
	p.list = nil
	p.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		if err := list[i].close(); err != nil {
			log.Error("release: close "+list[i].name, "err", err)
		}
	}
}

// noErr adapts a Close without a result.
func noErr(close func()) func() error {
	return func() error { close(); return nil }
}
